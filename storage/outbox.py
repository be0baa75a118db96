"""The outbox of posts other than watcher notices, and the cached DM channel of each person.

A post is keyed by what it says to whom (e.g. `connection/c-1`, `tell/U1/<digest>`). Before
calling Slack a replica *claims* the key: one statement that inserts the row claimed, or takes
over a claim that was released or expired, and matches nothing while the post is delivered or
another replica's claim is live. So of any number of replicas exactly one posts; one that dies
holding a claim loses it at `claimed_until`, and the post goes out from another.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from storage.statements import insert, insert_in, rowcount
from storage.tables.outbox import DM_CHANNELS, OUTBOX

# A stored post or edit is retried until it is delivered or its target is undeliverable:
# never given up after a number of tries (a storm's 429s can last minutes). Attempts are
# counted for the log only.
# A target Slack refuses for good (a deactivated person, an archived channel) is one row of
# its own in the outbox: key `undeliverable/<target>`, payload {"reason": <Slack's code>},
# created (and "delivered") when it was found. Inserted once; removed when it works again.
UNDELIVERABLE = "undeliverable"
# A message to render again from what is stored and post or edit (a cluster's message, a
# request's card and progress message): key `refresh/<what>/<id>`, payload {"refresh": what,
# "id": id, "lane": …}. Queued where its state is stored, or when Slack refused the edit; one
# per message, so edits coalesce: whatever is stored when it goes out is what is shown.
REFRESH = "refresh"
# A post whose outcome is unknown (Slack's answer was cut, HTML, empty, or never came) and that
# couldn't be looked for yet: key `maybe/<key>`, payload {"channel", "thread_ts", "oldest"},
# "delivered" when recorded (never retried itself). The next attempt at `<key>` looks for the
# message first (bot/slack/maybe.py) and posts only if Slack has none.
MAYBE = "maybe"
# What a sweep found at AI Reserve, not launched here: `refresh/found/<channel>` tells the
# channel (bot/slack/found.py), and `found/<cluster>` delivered says it was told in the digest.
FOUND = "found"


# The everyday reads, built once: a statement built at each call costs building it and walking
# it for its cache key, more than its execution (issue 32).
_GET = sa.select(OUTBOX).where(OUTBOX.c.key == sa.bindparam("key"))
_DM_CHANNEL = sa.select(DM_CHANNELS.c.channel_id).where(
    DM_CHANNELS.c.user_id == sa.bindparam("user_id"))
# So are the claim and the delivery of every post (bound names start with "_": an UPDATE's
# names that are column names would be values to SET).
_KEY = OUTBOX.c.key == sa.bindparam("_key")
_UNDELIVERED = OUTBOX.c.delivered_at.is_(None)
_TAKE_OVER = (sa.update(OUTBOX)
              .where(_KEY, _UNDELIVERED, sa.or_(OUTBOX.c.claimed_until.is_(None),
                                                OUTBOX.c.claimed_until <= sa.bindparam("_now")))
              .values(claimed_by=sa.bindparam("_holder", type_=OUTBOX.c.claimed_by.type),
                      claimed_until=sa.bindparam("_until", type_=OUTBOX.c.claimed_until.type),
                      attempts=OUTBOX.c.attempts + 1))
_DELIVERED = sa.update(OUTBOX).where(_KEY, _UNDELIVERED).values(
    delivered_at=sa.bindparam("_now", type_=OUTBOX.c.delivered_at.type), claimed_until=None)
_DELIVERED_AS_QUEUED = _DELIVERED.where(OUTBOX.c.created_at == sa.bindparam("_queued_at"))
_QUEUED_SINCE = (sa.update(OUTBOX)
                 .where(_KEY, _UNDELIVERED, OUTBOX.c.created_at != sa.bindparam("_queued_at"))
                 .values(claimed_until=None))
_RELEASE = (sa.update(OUTBOX)
            .where(_KEY, OUTBOX.c.claimed_by == sa.bindparam("_holder"), _UNDELIVERED)
            .values(claimed_until=None))
_DELIVERED_AMONG = sa.select(OUTBOX.c.key).where(
    OUTBOX.c.key.in_(sa.bindparam("keys", expanding=True)), OUTBOX.c.delivered_at.is_not(None))
_UNDELIVERABLE = (sa.select(OUTBOX).where(OUTBOX.c.kind == UNDELIVERABLE)
                  .order_by(OUTBOX.c.created_at, OUTBOX.c.key))


@cache
def _claim_new(dialect: str) -> Any:
    """The claim of a new key: its row inserted claimed (ON CONFLICT is the dialect's own)."""
    return (insert_in(dialect, OUTBOX).on_conflict_do_nothing(index_elements=["key"])
            .returning(OUTBOX.c.key))


@dataclass(frozen=True)
class OutboxItem:
    key: str
    kind: str
    target: str
    payload: dict[str, Any] | None
    created_at: datetime
    claimed_by: str | None
    claimed_until: datetime | None
    delivered_at: datetime | None
    attempts: int


class OutboxRepo:
    def __init__(self, session: AsyncConnection) -> None:
        self._session = session

    async def claim(self, key: str, *, kind: str, target: str, holder: str, now: datetime,
                    ttl: timedelta, payload: dict[str, Any] | None = None) -> bool:
        """True when `holder` may post `key` now: the key is new, or its earlier claim was
        released or has expired. False when it was delivered or another claim is live."""
        until = now + ttl
        added = await self._session.execute(_claim_new(self._session.dialect.name), {
            "key": key, "kind": kind, "target": target, "payload": payload, "created_at": now,
            "claimed_by": holder, "claimed_until": until, "attempts": 1})
        if added.first() is not None:
            return True
        return await rowcount(self._session, _TAKE_OVER,
                              {"_key": key, "_now": now, "_holder": holder, "_until": until}) == 1

    async def delivered(self, key: str, *, now: datetime,
                        queued_at: datetime | None = None) -> None:
        """`queued_at`: only if the entry wasn't queued again since (`queue` moved it on):
        else the claim is just released and the newer state goes out on a later pass."""
        if queued_at is None:
            await self._session.execute(_DELIVERED, {"_key": key, "_now": now})
            return
        await self._session.execute(_QUEUED_SINCE, {"_key": key, "_queued_at": queued_at})
        await self._session.execute(_DELIVERED_AS_QUEUED,
                                    {"_key": key, "_now": now, "_queued_at": queued_at})

    async def queue(self, key: str, *, kind: str, target: str, payload: dict[str, Any],
                    now: datetime) -> None:
        """Store (or store again) something to deliver: a new entry, or a delivered or
        pending one armed again with the latest `payload` — edits to one message coalesce,
        the latest wins. A live claim is left alone: its holder sees `created_at` moved and
        doesn't mark it delivered (`delivered(queued_at=…)`)."""
        await self._session.execute(_armed_again(insert(self._session, OUTBOX).values(
            key=key, kind=kind, target=target, payload=payload, created_at=now, attempts=0)))

    async def hold(self, key: str, *, kind: str, target: str, payload: dict[str, Any],
                   now: datetime) -> None:
        """Store a post for a target that can't take it now, unclaimed: `retryable` offers it
        once the target's undeliverable record is cleared. An entry already stored is kept."""
        await self._session.execute(
            insert(self._session, OUTBOX)
            .values(key=key, kind=kind, target=target, payload=payload, created_at=now,
                    attempts=0)
            .on_conflict_do_nothing(index_elements=["key"]))

    async def told(self, keys: Collection[str], *, kind: str, target: str,
                   now: datetime) -> None:
        """Record `keys` delivered at once (what one message told, e.g. a digest's members)."""
        for start in range(0, len(keys), 500):
            stmt = insert(self._session, OUTBOX).values([
                {"key": k, "kind": kind, "target": target, "created_at": now,
                 "delivered_at": now, "attempts": 1} for k in list(keys)[start:start + 500]])
            await self._session.execute(stmt.on_conflict_do_update(
                index_elements=["key"], set_={"delivered_at": now, "claimed_until": None}))

    async def release(self, key: str, *, holder: str) -> None:
        """Give a claim back (the post failed): the next delivery pass may try again."""
        await self._session.execute(_RELEASE, {"_key": key, "_holder": holder})

    async def retryable(self, *, now: datetime, limit: int = 100) -> list[OutboxItem]:
        """Stored posts and edits not delivered, unclaimed (or whose claim expired), oldest
        first — however often they were refused; one to an undeliverable target is left aside
        (else they would fill every page and starve the rest)."""
        gone = OUTBOX.alias("gone")
        stmt = (sa.select(OUTBOX)
                .where(OUTBOX.c.delivered_at.is_(None), OUTBOX.c.payload.is_not(None),
                       ~sa.exists().where(gone.c.kind == UNDELIVERABLE,
                                          gone.c.target == OUTBOX.c.target),
                       sa.or_(OUTBOX.c.claimed_until.is_(None), OUTBOX.c.claimed_until <= now))
                .order_by(OUTBOX.c.created_at, OUTBOX.c.key).limit(limit))
        return [OutboxItem(**row) for row in (await self._session.execute(stmt)).mappings()]

    async def queue_refresh(self, what: str, subject: str, *, lane: int, now: datetime,
                            **extra: Any) -> None:
        await self.queue(f"{REFRESH}/{what}/{subject}", kind=REFRESH, target=REFRESH,
                         payload={"refresh": what, "id": subject, "lane": lane, **extra},
                         now=now)

    async def queue_refreshes(self, what: str, lanes: Mapping[str, int], *,
                              now: datetime) -> None:
        """`queue_refresh` of each subject in `lanes` (subject → its lane): one statement."""
        if not lanes:
            return
        await self._session.execute(_armed_again(insert(self._session, OUTBOX)), [
            {"key": f"{REFRESH}/{what}/{subject}", "kind": REFRESH, "target": REFRESH,
             "payload": {"refresh": what, "id": subject, "lane": lane}, "created_at": now,
             "attempts": 0} for subject, lane in lanes.items()])

    async def mark_undeliverable(self, target: str, *, reason: str, now: datetime) -> bool:
        """Record that Slack refuses `target` for good; True only for the first record."""
        added = await self._session.execute(
            insert(self._session, OUTBOX)
            .values(key=f"{UNDELIVERABLE}/{target}", kind=UNDELIVERABLE, target=target,
                    payload={"reason": reason}, created_at=now, delivered_at=now, attempts=1)
            .on_conflict_do_nothing(index_elements=["key"])
            .returning(OUTBOX.c.key))
        return added.first() is not None

    async def undeliverable(self) -> list[OutboxItem]:
        """Every target recorded undeliverable, oldest first."""
        return [OutboxItem(**row)
                for row in (await self._session.execute(_UNDELIVERABLE)).mappings()]

    async def unreachable_reason(self, target: str) -> str | None:
        """Slack's code for `target` when it is recorded undeliverable; None while it works."""
        item = await self.get(f"{UNDELIVERABLE}/{target}")
        return None if item is None else str((item.payload or {}).get("reason"))

    async def reachable_again(self, target: str) -> None:
        await self._session.execute(
            sa.delete(OUTBOX).where(OUTBOX.c.key == f"{UNDELIVERABLE}/{target}"))

    async def remember_maybe(self, key: str, *, payload: dict[str, Any], now: datetime) -> None:
        stmt = insert(self._session, OUTBOX).values(
            key=f"{MAYBE}/{key}", kind=MAYBE, target=str(payload.get("channel")),
            payload=payload, created_at=now, delivered_at=now, attempts=1)
        await self._session.execute(stmt.on_conflict_do_nothing(index_elements=["key"]))

    async def maybe(self, key: str) -> dict[str, Any] | None:
        """Where `key` was maybe posted (see `MAYBE`), or None."""
        item = await self.get(f"{MAYBE}/{key}")
        return None if item is None else dict(item.payload or {})

    async def forget_maybe(self, key: str) -> None:
        await self._session.execute(sa.delete(OUTBOX).where(OUTBOX.c.key == f"{MAYBE}/{key}"))

    async def get(self, key: str) -> OutboxItem | None:
        row = (await self._session.execute(_GET, {"key": key})).mappings().one_or_none()
        return None if row is None else OutboxItem(**row)

    async def delivered_among(self, keys: Collection[str]) -> set[str]:
        """Which of `keys` were delivered (one query, however many)."""
        if not keys:
            return set()
        found: set[str] = set()
        wanted = list(keys)
        for start in range(0, len(wanted), 500):  # bound parameters per IN (…)
            rows = await self._session.execute(_DELIVERED_AMONG,
                                               {"keys": wanted[start:start + 500]})
            found.update(str(r[0]) for r in rows)
        return found


class DmChannelRepo:
    """user id → DM channel id, written once per person."""

    def __init__(self, session: AsyncConnection) -> None:
        self._session = session

    async def get(self, user_id: str) -> str | None:
        row = (await self._session.execute(_DM_CHANNEL, {"user_id": user_id})).first()
        return None if row is None else str(row[0])

    async def put(self, user_id: str, channel_id: str) -> None:
        stmt = insert(self._session, DM_CHANNELS).values(user_id=user_id, channel_id=channel_id)
        await self._session.execute(stmt.on_conflict_do_update(
            index_elements=["user_id"], set_={"channel_id": stmt.excluded.channel_id}))


def _armed_again(stmt: Any) -> Any:
    """An upsert of an outbox entry: one stored already gets the new payload and is pending."""
    return stmt.on_conflict_do_update(
        index_elements=["key"],
        set_={"payload": stmt.excluded.payload, "created_at": stmt.excluded.created_at,
              "target": stmt.excluded.target, "delivered_at": None})
