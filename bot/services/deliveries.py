"""Each delivery from Slack acts once, across replicas.

Slack retries an event it didn't see acked within 3 s (up to 3 times, same `event_id`), and a
retrying proxy in front of the bot may resend a command it didn't see answered. The retry may
reach another replica, or this one after a restart, so "seen" is a row in the database, not a
set in memory: the first delivery records its key (one INSERT … ON CONFLICT DO NOTHING) before
anything acts, and of any number of racing deliveries exactly one inserts it.

An event's row is written before the ack, so a process that dies between the two loses that
delivery (Slack's retry finds it recorded) — for what arrives this way (a Home opened) that is
the lesser harm next to acting twice. A command's, a submission's or a shortcut's first
delivery acts whatever is recorded, so its key is written after the ack (`remember`), with
every other key that arrives meanwhile in one transaction: a burst of 160 commands is a few
INSERTs, not 160 transactions competing with the listeners for the pool.

Keys live in `action_claims` beside the buttons' claims and are forgotten after `KEEP`: Slack's
last retry comes ~5 minutes after the first delivery.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from bot.clock import Clock
from bot.domain.claims import DELIVERY_ACTIONS, ClaimKey, Delivery
from storage.db import Database

KEEP = timedelta(days=1)
BATCH = 500  # keys per INSERT at most
RECORDED_BY = "slack"  # the claims' actor: a delivery is Slack's, whoever it is about


class Deliveries:
    def __init__(self, *, db: Database, clock: Clock) -> None:
        self._db = db
        self._clock = clock
        self._queued: list[tuple[ClaimKey, asyncio.Future[None]]] = []
        self._writer: asyncio.Task[None] | None = None

    async def first(self, delivery: Delivery) -> bool:
        """Record `delivery`; False when it repeats one already recorded (drop it)."""
        async with self._db.transaction() as repos:
            new = await repos.claims.record(delivery.key, actor_id=RECORDED_BY,
                                            now=self._clock.now())
        return new or not delivery.repeats()

    async def remember(self, delivery: Delivery) -> None:
        """Record `delivery`, which acts whatever is recorded, for a later retry to find: in
        one transaction with the others queued meanwhile. Raises what the write raised."""
        written = asyncio.get_running_loop().create_future()
        self._queued.append((delivery.key, written))
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write_queued())
        await written

    async def _write_queued(self) -> None:
        while self._queued:
            batch, self._queued = self._queued[:BATCH], self._queued[BATCH:]
            try:
                async with self._db.transaction() as repos:
                    await repos.claims.record_all([key for key, _ in batch],
                                                  actor_id=RECORDED_BY, now=self._clock.now())
            except Exception as exc:  # each waiter is told (bot/slack/once.py logs it)
                for _, written in batch:
                    if not written.done():
                        written.set_exception(exc)
            else:
                for _, written in batch:
                    if not written.done():
                        written.set_result(None)

    async def forget_old(self) -> int:
        """Drop the keys of deliveries older than `KEEP`: the table doesn't grow forever."""
        async with self._db.transaction() as repos:
            return await repos.claims.forget(actions=DELIVERY_ACTIONS,
                                             before=self._clock.now() - KEEP)
