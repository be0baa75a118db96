"""What a refused action would have spent: the amount of its audit row (issue 27.7).

A refusal is written by `@audited` (bot/services/audit.py) before anything was priced or
stored by the refused call itself, so the money at stake is read from what the call names: the
quote a request was asked from, the cluster a terminate or an extension is about, the request or
extension an approver decided on. Each returns cents (a rate for the actions whose amount is an
hourly rate, bot/slack/blocks/audit.py's HOURLY_ACTIONS; else a sum), or None when the thing
named doesn't exist (an unknown id refused as such).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from storage.db import Database

# (the service's database, the call's keyword arguments) → the cents at stake, or None
Stake = Callable[[Database, dict[str, Any]], Awaitable[int | None]]


async def quote_rate(db: Database, kwargs: dict[str, Any]) -> int | None:
    """A launch request: the rate of the quote it was asked from."""
    async with db.transaction() as repos:
        quote = await repos.quotes.get(str(kwargs.get("quote_id")))
    return quote.hourly_cents if quote is not None else None


async def request_rate(db: Database, kwargs: dict[str, Any]) -> int | None:
    """An approval, a rejection, a retry, a withdrawal: the request's rate."""
    async with db.transaction() as repos:
        request = await repos.requests.get(str(kwargs.get("request_id")))
    return request.hourly_cents if request is not None else None


async def cluster_rate(db: Database, kwargs: dict[str, Any]) -> int | None:
    """A terminate: the rate the cluster bills at (what terminating would stop)."""
    async with db.transaction() as repos:
        record = await repos.clusters.get(str(kwargs.get("cluster_id")))
    return record.hourly_cents if record is not None else None


async def extension_asked(db: Database, kwargs: dict[str, Any]) -> int | None:
    """An extension asked for: the cluster's rate × the hours asked."""
    hours = kwargs.get("hours")
    rate = await cluster_rate(db, kwargs)
    return rate * hours if rate is not None and isinstance(hours, int) else None


async def extension_sum(db: Database, kwargs: dict[str, Any]) -> int | None:
    """An extension an approver decided on: its rate × its hours."""
    async with db.transaction() as repos:
        ext = await repos.extensions.get(str(kwargs.get("extension_id")))
    return ext.hourly_cents * ext.hours if ext is not None else None
