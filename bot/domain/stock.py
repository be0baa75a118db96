"""Waiting for stock: the rules, pure (bot/services/stock.py applies them).

A request whose launch found no capacity may wait — up to the hours its requester picked,
within the policy's `max_stock_wait_hours` — while the bot re-quotes its shape. Re-quotes back
off (1, 2, 4, 8, then every 15 minutes) and are batched: one quote per shape and location per
round serves every request waiting for it. When stock appears at a rate within the approved one
the request launches through the launch saga; at a higher rate it asks the approvers again.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from bot.domain.errors import InvalidCommand
from bot.domain.models import LaunchRequest, QuoteSpec, RequestStatus

FIRST_CHECK = timedelta(minutes=1)
LONGEST_CHECK = timedelta(minutes=15)
# Stock quotes (probes and each waiter's own) a minute: the quote route allows 30 a minute per
# API key (contract §7) and people quoting share it, so waiting takes at most a third of it —
# and, one launch per waiter's quote, at most the 10 launches a minute AI Reserve allows.
MAX_QUOTES_PER_MINUTE = 10
WAIT_USAGE = "/cluster wait <request-id> hours=<H>   e.g. /cluster wait lr_3f9a0c1d2e4b hours=12"

ShapeKey = tuple[str, int, int, str | None]
# How a launch that found no capacity says so (bot/services/launching.py), and how a wait that
# ended says it: what tells a capacity failure (worth waiting for) from a payment one.
NO_CAPACITY = "couldn't place every node together"
NO_STOCK_CAME = "No stock came within"


def failed_for_capacity(request: LaunchRequest) -> bool:
    """A failed launch that waiting for stock could help (not one that needs a top-up)."""
    why = request.last_error or ""
    return request.status is RequestStatus.LAUNCH_FAILED and (
        NO_CAPACITY in why or NO_STOCK_CAME in why)


def check_wait_hours(raw: str | int | None, *, max_hours: int, usage: str = WAIT_USAGE) -> int:
    """The hours to wait, as typed: a whole number from 1 to the policy's maximum."""
    text = str(raw if raw is not None else "").strip()
    shown = text[:20] or "(nothing)"
    try:
        hours = int(text)
    except ValueError:
        raise InvalidCommand(f"The wait `{shown}` is not a whole number of hours; e.g. "
                             f"`hours={min(12, max_hours)}`.", bad_part=shown,
                             usage=usage) from None
    if hours <= 0:
        raise InvalidCommand(f"The wait `{shown}` must be at least 1 hour.", bad_part=shown,
                             usage=usage)
    if hours > max_hours:
        raise InvalidCommand(f"The wait `{shown}` is longer than the spend policy allows: at "
                             f"most {max_hours} hours (`max_stock_wait_hours`).",
                             bad_part=shown, usage=usage)
    return hours


def backoff(checks: int) -> timedelta:
    """The wait before the next re-quote, after `checks` earlier ones: 1, 2, 4, 8, then 15 min."""
    return min(FIRST_CHECK * (1 << min(checks, 10)), LONGEST_CHECK)


def start_waiting(request: LaunchRequest, *, now: datetime,
                  hours: int | None = None) -> dict[str, Any] | None:
    """The fields that put a capacity-failed request to waiting, or None if it doesn't wait:
    no wait was asked for, or the wait it was given has ended. A request already waiting
    keeps its deadline (a launch that lost the stock again goes back to the same wait)."""
    hours = hours if hours is not None else request.wait_hours
    if hours is None:
        return None
    until = request.wait_until if request.wait_until is not None and hours == request.wait_hours \
        else now + timedelta(hours=hours)
    if until <= now:
        return None
    return {"wait_hours": hours, "wait_until": until, "wait_next_at": now + FIRST_CHECK,
            "wait_checks": 0}


def shape_key(spec: QuoteSpec, location: str) -> ShapeKey:
    """What one re-quote answers for: the shape in one place."""
    s = spec.shape
    return (s.accelerator, s.gpus_per_node, s.nodes, location)


def is_due(request: LaunchRequest, now: datetime) -> bool:
    return (request.status is RequestStatus.WAITING
            and (request.wait_next_at is None or request.wait_next_at <= now))


def has_expired(request: LaunchRequest, now: datetime) -> bool:
    return (request.status is RequestStatus.WAITING and request.wait_until is not None
            and request.wait_until <= now)


def within_approved(request: LaunchRequest, hourly_cents: int) -> bool:
    """Stock at this rate may launch without asking again: never above the approved rate."""
    return hourly_cents <= request.hourly_cents
