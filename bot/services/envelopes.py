"""The approved spend envelope: how long a cluster may run, as approved with its request.

A sweep walks each live cluster with an envelope through its stages (bot/domain/envelope.py has
the timing) — each at most once, recorded on the cluster before anyone is told:
- 80 % of the approved hours: the owner and the approvers are warned;
- not enforced: before AI Reserve charges the first hour beyond the envelope, the owner and the
  approvers get **Extend** (judged by the spend policy: bot/domain/extension.py, applied by
  bot/services/extensions.py) / Terminate;
- with `enforce_lifetime` in the policy: the same prompt an hour before the last approved hour
  ends, then termination before AI Reserve would charge the hour beyond it — a cluster approved
  for H hours is never billed for more than H hours.
The sweep runs every poll interval; the margin before the charge covers that interval and a slow
provider, and "now" is AI Reserve's clock (the clock this service is given) on a reading taken
since the previous sweep began — read with a cheap call when no answer came since
(bot/services/provider_time.py) — and never earlier than AI Reserve's own figures prove: a
cluster whose `accruedHours` shows its last charge at a mark is at least there
(bot/domain/envelope.py `proven_now`). Issue 31: the estimate was only refreshed by the watch
sweep's answers, so while those stalled AI Reserve's clock ran away from it.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timedelta

from bot.clock import Clock
from bot.domain.envelope import deadline, ends_at, margin_for, next_stage, proven_now
from bot.domain.errors import DomainError
from bot.domain.extension import ExtensionStatus
from bot.domain.lanes import Lane, lane
from bot.domain.models import ClusterRecord, ClusterState
from bot.domain.ports import Notifier
from bot.reserve.port import ClusterProvider
from bot.services.audit import AuditLog
from bot.services.people import People
from bot.services.provider_time import ProviderTime
from bot.services.termination import TerminationService
from storage.db import Database

YIELD_EVERY = 200  # envelopes checked between two turns of the event loop

log = logging.getLogger(__name__)

_BILLING = (ClusterState.RUNNING, ClusterState.DEGRADED)


class EnvelopeService:
    def __init__(self, *, db: Database, provider: ClusterProvider, notifier: Notifier,
                 termination: TerminationService, people: People, audit: AuditLog,
                 clock: Clock, poll_interval: timedelta = timedelta(seconds=30)) -> None:
        """`clock`: AI Reserve's time (ProviderClock); `poll_interval`: how often `sweep` runs."""
        self._db = db
        self.margin = margin_for(poll_interval)
        self._provider = provider
        self._notifier = notifier
        self._termination = termination
        self._people = people
        self._audit = audit
        self._clock = clock
        self.time = ProviderTime(clock=clock, provider=provider)
        self._last_sweep: datetime | None = None  # host time the previous sweep began

    async def sweep(self) -> int:
        """Move every live cluster's envelope on; returns how many moved. Terminates first:
        the warnings and prompts are told after every due terminate was asked (in the money
        lane), so a slow Slack never holds up the next cluster's end."""
        with lane(Lane.MONEY):
            return await self._sweep()

    async def _sweep(self) -> int:
        moved = 0
        told: list[tuple[ClusterRecord, str, datetime, bool]] = []
        async with self._db.transaction() as repos:
            live = await repos.clusters.list_live(with_lifetime=True)
        if live:  # no answer since the last sweep began: read AI Reserve's clock first
            started = self.time.host_now()
            await self.time.now(since=self._last_sweep)
            self._last_sweep = started
        for i, record in enumerate(live):
            if i and i % YIELD_EVERY == 0:
                await asyncio.sleep(0)  # thousands of envelopes: let the event loop breathe
            now = proven_now(record, self._clock.now())
            # A planned run (`hours=`) ends at its envelope whatever the policy says.
            enforce = self._people.policy_for(record).enforce_lifetime or record.auto_terminate
            if record.envelope_stage == "enforced" and record.status in _BILLING:
                await self._enforce(record)  # an earlier terminate didn't land: again
                continue
            stage = next_stage(record, now=now, enforce=enforce, margin=self.margin)
            if stage is None:
                continue
            async with self._db.transaction() as repos:  # claim the stage before telling
                current = await repos.clusters.get(record.id)
                if current is None or next_stage(current, now=now, enforce=enforce,
                                                        margin=self.margin) != stage:
                    continue
                record = await repos.clusters.update(record.id, now=now, envelope_stage=stage)
            moved += 1
            if stage == "enforced":
                await self._announce(record, stage, now=now, enforce=enforce)
            else:
                told.append((record, stage, now, enforce))
        for record, stage, now, enforce in told:
            await self._announce(record, stage, now=now, enforce=enforce)
        return moved

    async def _announce(self, record: ClusterRecord, stage: str, *, now: datetime,
                        enforce: bool) -> None:
        end = ends_at(record)
        assert end is not None and record.lifetime_hours is not None
        approvers = sorted(await self._people.approvers_for(record))
        owner = [record.owner_id] if record.owner_id else []
        if stage in ("warned", "due", "final"):
            # Every DM of an enforced envelope states the one time it will be terminated.
            terminate_at = deadline(record, margin=self.margin) if enforce else None
            await self._notifier.envelope_notice(
                record, stage=stage, ends_at=end, terminate_at=terminate_at,
                recipients=sorted({*owner, *approvers}))
        else:  # enforced: nobody extended it
            log.warning("terminating %s: its approved envelope's next hour is charged at %s",
                        record.id, end)
            await self._audit.write(actor=None, action="enforce_envelope", subject_id=record.id,
                                    outcome="ok", amount_cents=record.accrued_cents,
                                    detail=f"envelope of {record.lifetime_hours} h was not "
                                           f"extended; terminated before AI Reserve charges "
                                           f"hour {record.lifetime_hours + 1} at "
                                           f"{end:%Y-%m-%d %H:%M} UTC")
            await self._enforce(record)
            await self._end_pending_extensions(record)

    async def _end_pending_extensions(self, record: ClusterRecord) -> None:
        """An extension still waiting for approvers when the envelope ended: its card says it
        was not extended (no Approve left to press), and the owner and the asker are told."""
        now = self._clock.now()
        async with self._db.transaction() as repos:
            ended = [await repos.extensions.decide(
                e.id, now=now, status=ExtensionStatus.STALE,
                note=f"`{record.id}` reached the end of its envelope and was terminated "
                     "before this was decided.")
                for e in await repos.extensions.pending(cluster_id=record.id)]
        for ext in ended:
            if ext is None:
                continue  # decided meanwhile
            await self._notifier.refresh_extension(ext.id)
            for person in sorted({ext.owner_id, ext.requested_by}):
                await self._notifier.tell(person, (
                    f"The extension of `{record.id}` by {ext.hours} h (`{ext.id}`) was still "
                    "waiting for approvers when its envelope ended: the cluster was terminated "
                    "and nothing was extended."), key=f"extension-ended/{ext.id}")

    async def _enforce(self, record: ClusterRecord) -> None:
        """Terminate (idempotent at AI Reserve). A failure is logged, not raised: the stage is
        recorded, so the next sweep tries again, and the other clusters' envelopes still move."""
        try:
            await self._termination.terminate_for_policy(cluster_id=record.id)
        except DomainError as exc:
            log.error("terminating %s for its envelope failed (%s); retrying next sweep",
                      record.id, exc.user_message)
