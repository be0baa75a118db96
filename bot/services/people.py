"""Who may decide and who may spend: the spend policy's approvers (ids and a Slack user group),
its admins, its requesters (ids and user groups), guests; and where the app is installed.

Group members and whether a person is a guest are read from Slack through the `Directory` port
and kept for a few minutes, so a click is answered from memory and a change is seen soon after.
The decision itself is pure (bot/domain/spenders.py); this gathers the facts it needs.

Which policy: a deployment may serve several installations, each with a policy of its own
(bot/domain/places.py). `policy_for(x)` is the policy where `x` comes from — a launch request, a
cluster, a person's request; `policy` is the one where the request being served comes from
(`HERE`, set by the gate once a request is let in: bot/slack/gate.py), the top level outside
any request. Work about a stored request or cluster asks for *its* policy (`policy_for`, or
`at(record)` around a service that reads `policy`): an approver from another installation is
judged by the request's approvers, not their own.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime, timedelta

from bot.clock import Clock
from bot.domain.errors import NotAllowed
from bot.domain.installation import Installed
from bot.domain.models import Actor
from bot.domain.places import Place, Placed, Policies
from bot.domain.policy import Policy
from bot.domain.ports import Directory
from bot.domain.spenders import SpenderFacts, spender_refusal

log = logging.getLogger(__name__)

GROUP_TTL = timedelta(minutes=5)
GUEST_TTL = timedelta(minutes=5)
# Where the request being served comes from (its task and what it starts inherit it).
HERE: ContextVar[Place | None] = ContextVar("here", default=None)


class People:
    def __init__(self, *, policies: Policies, directory: Directory, clock: Clock) -> None:
        self.policies = policies  # replaced whole on a reload (bot/app/reload.py)
        # Where the app is installed: auth.test, read at start (`read_installation`); None
        # until Slack has answered. Every request is judged against it (bot/slack/gate.py)
        # without a call to Slack on the way to its ack.
        self.installation: Installed | None = None
        self._directory = directory
        self._clock = clock
        self._groups: dict[str, tuple[frozenset[str], datetime]] = {}
        self._guests: dict[str, tuple[bool, datetime]] = {}

    @property
    def policy(self) -> Policy:
        """The policy where the request being served comes from (the top level outside one)."""
        return self.policies.for_place(HERE.get())

    def policy_for(self, where: Placed | None) -> Policy:
        return self.policies.for_place(where)

    def own_channels(self) -> tuple[str, ...]:
        """The channels the serving request's own policy names in place of the top level's
        (its approvals channel, a channel to escalate to): its installation's, for the calls
        made later outside any request (bot/slack/tenancy.py)."""
        key = self.policies.key_for(HERE.get())
        return () if key is None else self._named(key)

    def claimed_channels(self) -> set[str]:
        """Every channel an installation's own policy names (`own_channels` of each)."""
        return {c for key in self.policies.places for c in self._named(key)}

    def _named(self, key: str) -> tuple[str, ...]:
        own, top = self.policies.places[key], self.policies.default
        return tuple(c for c in (own.approvals_channel, own.escalate_to)
                     if c and c[0] in "CG" and c not in (top.approvals_channel, top.escalate_to))

    @staticmethod
    def serving(actor: Actor) -> None:
        """The request being served comes from `actor`'s workspace (the gate let it in)."""
        HERE.set(Place(team_id=actor.team_id, enterprise_id=actor.enterprise_id))

    @contextmanager
    def at(self, where: Placed | None) -> Iterator[Policy]:
        """`policy` (and the approvers, the groups) are `where`'s inside the block."""
        token = HERE.set(None if where is None else Place(team_id=where.team_id,
                                                          enterprise_id=where.enterprise_id))
        try:
            yield self.policy
        finally:
            HERE.reset(token)

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

    async def approvers_for(self, where: Placed | None) -> frozenset[str]:
        """The approvers where `where` (a cluster, a request) comes from."""
        with self.at(where):
            return await self.approvers()

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
        for key in sorted(set(self.policies.places) - {found.team_id, found.enterprise_id}):
            log.warning("the policy file's installations.%s never applies: this bot token "
                        "serves workspace %s only (install through OAuth to serve several)",
                        key, found.team_id)
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
