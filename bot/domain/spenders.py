"""Who may spend: the requesters of the spend policy, and guests.

Pure: the caller (bot/services/people.py) resolves the facts — whether the person is a Slack
guest, the members of the requesters' user groups — and `spender_refusal` says no (in plain
words naming the rule) or None. Checked before anything that commits money: a launch request,
an extension, a relaunch on a volume, a bigger volume. Whether the request comes from the installed
workspace at all is decided before any of this, for every request (bot/domain/installation.py).
"""

from __future__ import annotations

from bot.domain.models import Frozen
from bot.domain.policy import Policy


class SpenderFacts(Frozen):
    """What Slack says about the person asking (resolved by the caller)."""

    user_id: str
    is_guest: bool = False  # users.info is_restricted or is_ultra_restricted
    # A member of one of the policy's requester groups, or an approver or admin (they are
    # requesters by right: a list of requesters never locks out the people who decide).
    in_requester_groups: bool = False


def spender_refusal(policy: Policy, facts: SpenderFacts) -> str | None:
    """None if this person may ask to spend, else why not — the first rule that says no."""
    if facts.is_guest and not policy.allow_guests:
        return ("Guest accounts can't request spending: the spend policy doesn't allow guests "
                "(allow_guests). Ask a full member of the workspace to request it.")
    listed = policy.requester_ids or policy.requester_groups
    if listed and facts.user_id not in policy.requester_ids and not facts.in_requester_groups:
        return ("Only the spend policy's requesters can request spending, and you're not one "
                "of them (requesters). Ask an approver to add you, or someone listed to "
                "request it.")
    return None
