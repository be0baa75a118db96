"""Who may spend: the requesters of the spend policy, guests, and the installed workspace.

Pure: the caller (bot/services/people.py) resolves the facts — whether the person is a Slack
guest, the members of the requesters' user groups, the team the payload came from and the
team the app is installed in — and `spender_refusal` says no (in plain words naming the rule)
or None. Checked before anything that commits money: a launch request, an extension, a
relaunch on a volume.
"""

from __future__ import annotations

from bot.domain.models import Frozen
from bot.domain.policy import Policy


class Installed(Frozen):
    """Where the app is installed (auth.test at start): one workspace, or a whole Enterprise
    organization (an org-wide install serves every workspace of that enterprise)."""

    team_id: str | None = None
    enterprise_id: str | None = None
    org_wide: bool = False


class SpenderFacts(Frozen):
    """What Slack says about the person asking (resolved by the caller)."""

    user_id: str
    team_id: str | None = None  # from the signed payload
    enterprise_id: str | None = None
    is_guest: bool = False  # users.info is_restricted or is_ultra_restricted
    # A member of one of the policy's requester groups, or an approver or admin (they are
    # requesters by right: a list of requesters never locks out the people who decide).
    in_requester_groups: bool = False


def foreign_workspace(installed: Installed, *, team_id: str | None,
                      enterprise_id: str | None) -> bool:
    """True when the payload comes from outside the installation. An unknown side (no
    auth.test answer yet, a payload without the id) is not proof of anything: not foreign."""
    if installed.org_wide:
        return (installed.enterprise_id is not None and enterprise_id is not None
                and enterprise_id != installed.enterprise_id)
    return installed.team_id is not None and team_id is not None and team_id != installed.team_id


def spender_refusal(policy: Policy, installed: Installed, facts: SpenderFacts) -> str | None:
    """None if this person may ask to spend, else why not — the first rule that says no."""
    if foreign_workspace(installed, team_id=facts.team_id, enterprise_id=facts.enterprise_id):
        return ("This bot only takes requests from the workspace it is installed in; yours "
                f"({facts.team_id or facts.enterprise_id}) is another one.")
    if facts.is_guest and not policy.allow_guests:
        return ("Guest accounts can't request spending: the spend policy doesn't allow guests "
                "(allow_guests). Ask a full member of the workspace to request it.")
    listed = policy.requester_ids or policy.requester_groups
    if listed and facts.user_id not in policy.requester_ids and not facts.in_requester_groups:
        return ("Only the spend policy's requesters can request spending, and you're not one "
                "of them (requesters). Ask an approver to add you, or someone listed to "
                "request it.")
    return None
