"""Degraded clusters get an owner on duty: Acknowledge, Snooze 1 h, and the escalation sweep.

The rules are bot/domain/duty.py's; here are the transactions, the audit rows and the telling.
Acknowledging is a compare-and-set on the episode's row (once, by one person); a snooze is
bound to how many times it was snoozed when shown; each escalation is stamped by a
compare-and-set before it is told, so of any number of replicas — and across a restart — one
escalates, once per episode and kind. The escalation's words carry what the episode has cost
so far: the charges AI Reserve made inside it (bot/domain/charges.py), never an estimate.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Unpack

from bot.domain import policies
from bot.domain.duty import SNOOZE, Duty, Escalation, episode_of, escalation_due, lost_cents
from bot.domain.errors import Conflict
from bot.domain.models import Actor, ClusterRecord
from bot.domain.policy import money
from bot.domain.ports import DutyNotifier
from bot.services.acting import ActingService, Basics
from bot.services.audit import audited


class DutyService(ActingService):
    def __init__(self, *, notices: DutyNotifier, **basics: Unpack[Basics]) -> None:
        super().__init__(**basics)
        self._notices = notices

    async def _in_episode(self, cluster_id: str, episode: int) -> ClusterRecord:
        async with self._db.transaction() as repos:
            record = await repos.clusters.require(cluster_id)
        if episode_of(record) != episode:
            raise Conflict(f"This notice is about an earlier degraded episode of "
                           f"`{cluster_id}`; it is {record.status.value} now. Nothing was "
                           "changed.")
        return record

    @audited("acknowledge", subject="cluster_id")
    async def acknowledge(self, *, cluster_id: str, episode: int,
                          actor: Actor) -> ClusterRecord:
        """Record who is on the episode (anyone who sees the notice may be: on-call, too)."""
        record = await self._in_episode(cluster_id, episode)
        now = self._clock.now()
        async with self._db.transaction() as repos:
            first = await repos.duties.acknowledge(cluster_id, episode, by=actor.user_id,
                                                   now=now)
            duty = await repos.duties.get(cluster_id, episode)
        assert duty is not None
        if not first:
            raise Conflict(f"Already acknowledged by <@{duty.acknowledged_by}>: they are on "
                           f"`{cluster_id}`. Nothing was changed.")
        await self._notices.duty_changed(record, duty, event="acknowledged")
        return record

    @audited("snooze", subject="cluster_id")
    async def snooze(self, *, cluster_id: str, episode: int, shown: int,
                     actor: Actor) -> ClusterRecord:
        """Put the escalation off for an hour (the owner or an approver: it delays the alarm
        that stops the bill)."""
        record = await self._in_episode(cluster_id, episode)
        policies.ensure_can_act_on_cluster(record, actor,
                                           await self._people.approvers_for(record))
        now = self._clock.now()
        async with self._db.transaction() as repos:
            done = await repos.duties.snooze(cluster_id, episode, by=actor.user_id,
                                             until=now + SNOOZE, shown=shown, now=now)
            duty = await repos.duties.get(cluster_id, episode)
        assert duty is not None
        if not done:
            raise Conflict(_not_snoozed(duty, cluster_id))
        await self._notices.duty_changed(record, duty, event="snoozed")
        return record

    async def escalate_due(self) -> int:
        """The sweep: escalate every degraded episode that is due (bot/domain/duty.py), each
        stamped before it is told, to whom its installation's policy says. Returns how many
        were escalated here."""
        if all(p.escalate_to is None for p in self._people.policies.all()):
            return 0
        now = self._clock.now()
        async with self._db.transaction() as repos:
            degraded = await repos.clusters.list_degraded()
            due: list[tuple[ClusterRecord, int, Escalation]] = []
            for record in degraded:
                episode, policy = episode_of(record), self._people.policy_for(record)
                if episode is None or policy.escalate_to is None:
                    continue
                kind = escalation_due(record, await repos.duties.get(record.id, episode),
                                      after=timedelta(minutes=policy.escalate_after_minutes),
                                      now=now)
                if kind is not None:
                    due.append((record, episode, kind))
        told = 0
        for record, episode, kind in due:
            policy = self._people.policy_for(record)
            target = str(policy.escalate_to)
            lost, charges = lost_cents(record, now=now)
            async with self._db.transaction() as repos:
                if not await repos.duties.escalated(record.id, episode, kind, now=now):
                    continue  # another replica (or an earlier sweep) escalated it
                duty = await repos.duties.get(record.id, episode)
            assert duty is not None
            await self._audit.write(
                actor=None, action="escalate", subject_id=record.id, outcome="ok",
                amount_cents=lost,
                detail=f"degraded episode {episode} escalated to {target} ({kind.value}): "
                       f"{money(lost)} lost so far at {money(record.hourly_cents)}/h")
            await self._notices.escalate(record, duty, kind, target=target, lost_cents=lost,
                                         charges=charges,
                                         after_minutes=policy.escalate_after_minutes)
            told += 1
        return told


def _not_snoozed(duty: Duty, cluster_id: str) -> str:
    if duty.acknowledged_by is not None:
        return (f"<@{duty.acknowledged_by}> has acknowledged `{cluster_id}`: nobody will be "
                "escalated for this episode, so there is nothing to snooze.")
    until = duty.snoozed_until.strftime("%H:%M UTC") if duty.snoozed_until else "later"
    return (f"Already snoozed by <@{duty.snoozed_by}> until {until} since this notice was "
            f"shown. Nothing more was changed.")
