"""The launch saga's repositories: the quotes each request held, and the stored launch intents.

Like every repository they work inside the one transaction they were given and never commit.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.domain.errors import UnknownResource
from bot.domain.launch import IntentState, LaunchIntent
from storage.rows import field_values, in_chunks, row_values, to_domain
from storage.statements import MANAGED, insert, rowcount
from storage.tables.requests import LAUNCH_INTENTS, REQUEST_QUOTES

# Built once (values bound at execution): see storage/repositories.py.
_QUOTES_OF = (sa.select(REQUEST_QUOTES.c.quote_id)
              .where(REQUEST_QUOTES.c.request_id == sa.bindparam("request_id"))
              .order_by(REQUEST_QUOTES.c.added_at.desc(), REQUEST_QUOTES.c.quote_id.desc()))
_INTENTS_OF = (sa.select(LAUNCH_INTENTS)
               .where(LAUNCH_INTENTS.c.request_id == sa.bindparam("request_id"))
               .order_by(LAUNCH_INTENTS.c.created_at, LAUNCH_INTENTS.c.idempotency_key))


class RequestQuoteRepo:
    """Which request ever held which quote (a quote belongs to at most one request)."""

    def __init__(self, session: AsyncConnection) -> None:
        self._session = session

    async def add(self, *, request_id: str, quote_id: str, now: datetime) -> None:
        """Remember that `request_id` was priced with `quote_id` (again: a no-op)."""
        stmt = insert(self._session, REQUEST_QUOTES).values(
            quote_id=quote_id, request_id=request_id, added_at=now)
        await self._session.execute(stmt.on_conflict_do_nothing(index_elements=["quote_id"]))

    async def quotes_of(self, request_id: str) -> list[str]:
        """Every quote `request_id` held, newest first."""
        found = await self._session.execute(_QUOTES_OF, {"request_id": request_id})
        return list(found.scalars())

    async def requests_of(self, quote_ids: Collection[str]) -> dict[str, str]:
        """quote id → the request that held it, for those of `quote_ids` any request held."""
        held: dict[str, str] = {}
        for chunk in in_chunks(quote_ids):
            rows = await self._session.execute(
                sa.select(REQUEST_QUOTES.c.quote_id, REQUEST_QUOTES.c.request_id)
                .where(REQUEST_QUOTES.c.quote_id.in_(chunk))
            )
            held.update({row.quote_id: row.request_id for row in rows})
        return held


class LaunchIntentRepo:
    """Launch intents by idempotency key."""

    def __init__(self, session: AsyncConnection) -> None:
        self._session = session

    async def add(self, intent: LaunchIntent) -> LaunchIntent:
        """Store `intent`; if its key is already stored, return the stored one unchanged (the
        body first written under a key is the one every replay sends)."""
        stmt = insert(self._session, LAUNCH_INTENTS).values(row_values(intent))
        await self._session.execute(
            stmt.on_conflict_do_nothing(index_elements=["idempotency_key"]))
        stored = await self.get(intent.idempotency_key)
        assert stored is not None  # inserted now or earlier, and visible to this transaction
        return stored

    async def get(self, key: str) -> LaunchIntent | None:
        row = (await self._session.execute(
            sa.select(LAUNCH_INTENTS).where(LAUNCH_INTENTS.c.idempotency_key == key)
        )).mappings().one_or_none()
        return None if row is None else to_domain(LaunchIntent, row)

    async def for_request(self, request_id: str) -> list[LaunchIntent]:
        """Every intent of `request_id`, oldest first."""
        rows = (await self._session.execute(_INTENTS_OF, {"request_id": request_id})).mappings()
        return [to_domain(LaunchIntent, row) for row in rows]

    async def update(self, key: str, *, now: datetime, **fields: Any) -> LaunchIntent:
        """Set `fields` (and `updated_at=now`); UnknownResource if no such key."""
        values = field_values(LaunchIntent, fields, forbidden=MANAGED | {"idempotency_key"})
        stmt = (sa.update(LAUNCH_INTENTS)
                .where(LAUNCH_INTENTS.c.idempotency_key == key)
                .values({**values, "updated_at": now}))
        if await rowcount(self._session, stmt) == 0:
            raise UnknownResource("launch intent", key)
        updated = await self.get(key)
        assert updated is not None
        return updated

    async def count_server_error(self, key: str, *, now: datetime) -> LaunchIntent:
        """One more 5xx under `key` (an atomic increment: concurrent workers both count)."""
        stmt = (sa.update(LAUNCH_INTENTS)
                .where(LAUNCH_INTENTS.c.idempotency_key == key)
                .values(server_errors=LAUNCH_INTENTS.c.server_errors + 1, updated_at=now))
        if await rowcount(self._session, stmt) == 0:
            raise UnknownResource("launch intent", key)
        updated = await self.get(key)
        assert updated is not None
        return updated

    async def settle_request(self, request_id: str, *, cluster_id: str, quote_id: str,
                             now: datetime) -> None:
        """The request's cluster is known: its open intents are over — accepted if they
        launched from the cluster's quote, superseded otherwise."""
        open_ = sa.and_(LAUNCH_INTENTS.c.request_id == request_id,
                        LAUNCH_INTENTS.c.state == IntentState.OPEN.value)
        await self._session.execute(
            sa.update(LAUNCH_INTENTS).where(open_, LAUNCH_INTENTS.c.quote_id == quote_id)
            .values(state=IntentState.ACCEPTED.value, cluster_id=cluster_id, updated_at=now))
        await self._session.execute(
            sa.update(LAUNCH_INTENTS).where(open_)
            .values(state=IntentState.SUPERSEDED.value, updated_at=now))
