"""Who may decide: the spend policy's approvers (ids and a Slack user group) and its admins.

The group's members are read from Slack through the `Directory` port and kept for a few
minutes, so a click is answered from memory and a membership change is seen soon after.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from bot.clock import Clock
from bot.domain.policy import Policy
from bot.domain.ports import Directory

log = logging.getLogger(__name__)

GROUP_TTL = timedelta(minutes=5)


class People:
    def __init__(self, *, policy: Policy, directory: Directory, clock: Clock) -> None:
        self.policy = policy
        self._directory = directory
        self._clock = clock
        self._members: frozenset[str] = frozenset()
        self._read_at: datetime | None = None

    async def group_members(self) -> frozenset[str]:
        group = self.policy.approver_group
        if group is None:
            return frozenset()
        now = self._clock.now()
        if self._read_at is None or now - self._read_at >= GROUP_TTL:
            try:
                self._members = await self._directory.group_members(group)
                self._read_at = now
            except Exception:  # Slack unreachable: keep the last known members (maybe none)
                log.warning("could not read user group %s; using the last known members", group,
                            exc_info=True)
        return self._members

    async def approvers(self) -> frozenset[str]:
        """Everyone who may approve, act on any cluster, and read the audit trail."""
        return self.policy.approver_ids | self.policy.admin_ids | await self.group_members()
