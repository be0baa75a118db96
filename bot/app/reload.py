"""SIGHUP: read the policy file again, and use it only if it is sound.

A sound file replaces the policy the services read (`People.policy`, the quote's auto-approve
line) at once; the next quote, approval and sweep use it. A bad file changes nothing: each
problem is logged with its line, and the admins (else the approvers) of the policy in force are
told in a DM through the notifier's outbox (`tell`: said once per distinct bad file). The
approvals channel is the one thing read only at start: a change to it is logged as needing a
restart.
"""

from __future__ import annotations

import logging
from hashlib import sha256

from bot.app.process import Runtime
from bot.config.policy_file import PolicyError, load_policy
from bot.domain.policy import Policy

log = logging.getLogger(__name__)


async def reload_policy(rt: Runtime) -> list[str]:
    """Reload POLICY_FILE; returns the problems that kept the old policy (empty: reloaded)."""
    path = rt.settings.policy_file
    if path is None:
        log.info("SIGHUP: no POLICY_FILE is set; the policy comes from APPROVERS and "
                 "APPROVALS_CHANNEL, read at start")
        return []
    people = rt.services.people
    old = people.policy
    try:
        new = load_policy(path)
    except PolicyError as exc:
        for problem in exc.problems:
            log.error("policy reload refused, the old policy stays: %s", problem)
        await _tell_admins(rt, old, exc.problems)
        return exc.problems
    people.policy = new
    rt.services.quoting.use_policy(new)
    if new.approvals_channel and new.approvals_channel != old.approvals_channel:
        log.warning("policy reloaded, but the approvals channel (%s) changes only at the next "
                    "start", new.approvals_channel)
    log.info("policy reloaded from %s", path)
    return []


async def _tell_admins(rt: Runtime, policy: Policy, problems: list[str]) -> None:
    admins = sorted(policy.admin_ids or policy.approver_ids)
    text = ("The policy file was changed but not used: it has problems, so the old policy "
            "stays in force.\n" + "\n".join(f"• `{p}`" for p in problems[:20]))
    key = "policy-reload/" + sha256("\n".join(problems).encode()).hexdigest()[:16]
    for admin in admins:
        try:
            await rt.notifier.tell(admin, text, key=key)
        except Exception:  # the outbox retries refused posts; anything else: logged, not fatal
            log.warning("could not tell %s about the refused policy file", admin, exc_info=True)
