"""Who may decide and who may spend: the spend policy's approvers (ids and a Slack user group),
its admins, its requesters (ids and user groups), guests; and where the app is installed.

Group members and whether a person is a guest are read from Slack through the `Directory` port
and kept for a few minutes, so a click is answered from memory and a change is seen soon after.
The decision itself is pure (bot/domain/spenders.py); this gathers the facts it needs.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from bot.clock import Clock
from bot.domain.errors import NotAllowed
from bot.domain.installation import Installed
from bot.domain.models import Actor
from bot.domain.policy import Policy
from bot.domain.ports import Directory
from bot.domain.spenders import SpenderFacts, spender_refusal

log = logging.getLogger(__name__)

GROUP_TTL = timedelta(minutes=5)
GUEST_TTL = timedelta(minutes=5)


class People:
    def __init__(self, *, policy: Policy, directory: Directory, clock: Clock) -> None:
        self.policy = policy
        # Where the app is installed: auth.test, read at start (`read_installation`); None
        # until Slack has answered. Every request is judged against it (bot/slack/gate.py)
        # without a call to Slack on the way to its ack.
        self.installation: Installed | None = None
        self._directory = directory
        self._clock = clock
        self._groups: dict[str, tuple[frozenset[str], datetime]] = {}
        self._guests: dict[str, tuple[bool, datetime]] = {}

    async def group_members(self) -> frozenset[str]:
        group = self.policy.approver_group
        return frozenset() if group is None else await self._members(group)

    async def _members(self, group: str) -> frozenset[str]:
        now = self._clock.now()
        known = self._groups.get(group)
        if known is None or now - known[1] >= GROUP_TTL:
            try:
                self._groups[group] = (await self._directory.group_members(group), now)
            except Exception:  # Slack unreachable: keep the last known members (maybe none)
                log.warning("could not read user group %s; using the last known members", group,
                            exc_info=True)
        found = self._groups.get(group)
        return found[0] if found else frozenset()

    async def approvers(self) -> frozenset[str]:
        """Everyone who may approve, act on any cluster, and read the audit trail."""
        return self.policy.approver_ids | self.policy.admin_ids | await self.group_members()

    async def _is_guest(self, user_id: str) -> bool:
        now = self._clock.now()
        known = self._guests.get(user_id)
        if known is None or now - known[1] >= GUEST_TTL:
            try:
                self._guests[user_id] = (await self._directory.is_guest(user_id), now)
            except Exception:
                if known is None:  # never known: don't let money through on a guess
                    log.warning("could not read whether %s is a guest", user_id, exc_info=True)
                    raise NotAllowed("Slack didn't say whether your account may spend (a guest "
                                     "check); nothing was requested — try again in a minute."
                                     ) from None
        return self._guests[user_id][0]

    async def read_installation(self) -> Installed:
        """Ask Slack where the app is installed (auth.test) and keep the answer."""
        found = self.installation = await self._directory.installed()
        log.info("installed in workspace %s, organization %s%s", found.team_id,
                 found.enterprise_id or "none", " (org-wide)" if found.org_wide else "")
        return found

    async def spend_refusal(self, user_id: str) -> str | None:
        """Why `user_id` may not ask for money (the rule named), or None: what a quote card
        says before offering *Request launch* (bot/services/quoting.py)."""
        try:
            await self.ensure_may_spend(Actor(user_id=user_id))
        except NotAllowed as exc:
            return exc.user_message
        return None

    async def ensure_may_spend(self, actor: Actor) -> None:
        """Raise NotAllowed (a private answer naming the rule; the caller's @audited records
        the refusal) unless `actor` may ask for money: a launch, an extension, a relaunch, a
        bigger volume. Approvers and admins are requesters by right: a list of requesters never
        locks out the people who decide. (The workspace was checked before the request got
        here: bot/slack/gate.py.)"""
        policy = self.policy
        guest = not policy.allow_guests and await self._is_guest(actor.user_id)
        listed = False  # beyond requester_ids: a requester group's member, or a decider
        if (policy.requester_ids or policy.requester_groups) \
                and actor.user_id not in policy.requester_ids:
            listed = actor.user_id in await self.approvers()
            for group in sorted(policy.requester_groups):
                if listed:
                    break
                listed = actor.user_id in await self._members(group)
        refusal = spender_refusal(policy, SpenderFacts(
            user_id=actor.user_id, is_guest=guest, in_requester_groups=listed))
        if refusal is not None:
            raise NotAllowed(refusal)
