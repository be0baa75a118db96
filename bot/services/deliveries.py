"""Each delivery from Slack acts once, across replicas.

Slack retries an event it didn't see acked within 3 s (up to 3 times, same `event_id`), and a
retrying proxy in front of the bot may resend a command it didn't see answered. The retry may
reach another replica, or this one after a restart, so "seen" is a row in the database, not a
set in memory: the first delivery records its key (one INSERT … ON CONFLICT DO NOTHING) before
anything acts, and of any number of racing deliveries exactly one inserts it.

The row is written before the ack, so a process that dies between the two loses that delivery
(Slack's retry finds it recorded) — for what arrives this way (a Home opened, a command the
person can type again) that is the lesser harm next to acting twice.

Keys live in `action_claims` beside the buttons' claims and are forgotten after `KEEP`: Slack's
last retry comes ~5 minutes after the first delivery.
"""

from __future__ import annotations

from datetime import timedelta

from bot.clock import Clock
from bot.domain.claims import DELIVERY_ACTIONS, Delivery
from storage.db import Database

KEEP = timedelta(days=1)
RECORDED_BY = "slack"  # the claims' actor: a delivery is Slack's, whoever it is about


class Deliveries:
    def __init__(self, *, db: Database, clock: Clock) -> None:
        self._db = db
        self._clock = clock

    async def first(self, delivery: Delivery) -> bool:
        """Record `delivery`; False when it repeats one already recorded (drop it)."""
        async with self._db.transaction() as repos:
            new = await repos.claims.record(delivery.key, actor_id=RECORDED_BY,
                                            now=self._clock.now())
        return new or not delivery.repeats()

    async def forget_old(self) -> int:
        """Drop the keys of deliveries older than `KEEP`: the table doesn't grow forever."""
        async with self._db.transaction() as repos:
            return await repos.claims.forget(actions=DELIVERY_ACTIONS,
                                             before=self._clock.now() - KEEP)
