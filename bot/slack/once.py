"""The one place a repeated delivery from Slack is dropped (bot/services/deliveries.py).

A Bolt global middleware, so it runs after Bolt's request verification (a forged request never
records a key) and before any listener, for HTTP and Socket Mode alike (Bolt copies a Socket
Mode envelope's `retry_attempt` into the same `x-slack-retry-num` header). A repeat is acked
with an empty 200 — Slack stops retrying — and nothing else happens.

What is recorded:
- an Events API delivery, by its `event_id`, always (a repeat is dropped with or without the
  retry header: Slack never reuses an event_id);
- a slash command, a modal submission or a shortcut, by a digest of its payload, always; a
  later copy is dropped only when it carries `x-slack-retry-num`. The payload holds Slack's
  `trigger_id`, unique per person's action, so two commands typed alike differ, while a proxy's
  resend is byte for byte the same. The first delivery carries no header, so it must be
  recorded too: one INSERT per command, on the way to its ack.
- not button presses (`block_actions`): each is claimed by what it acts on (bot/services/
  claims.py), which also refuses a repeat and tells the presser; nor type-ahead lookups
  (`block_suggestion`), which change nothing.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from sqlalchemy.exc import SQLAlchemyError

from bot.domain.claims import EVENT, PAYLOAD, Delivery
from bot.services.deliveries import Deliveries

log = logging.getLogger(__name__)

RETRY_NUM = "x-slack-retry-num"
_ACTING_PAYLOADS = frozenset({"view_submission", "shortcut", "message_action"})

Middleware = Callable[[AsyncBoltRequest, BoltResponse, Callable[[], Awaitable[None]]],
                      Awaitable[BoltResponse | None]]


def delivery_of(body: dict[str, Any], headers: dict[str, Any]) -> Delivery | None:
    """What names this request among Slack's deliveries; None for what is never deduplicated."""
    retried = bool(headers.get(RETRY_NUM))
    kind = body.get("type")  # anything at all in a fuzzed payload
    if kind == "event_callback":
        event_id = body.get("event_id")
        return Delivery(kind=EVENT, id=event_id, retried=retried) \
            if isinstance(event_id, str) and event_id else None
    if "command" in body or (isinstance(kind, str) and kind in _ACTING_PAYLOADS):
        # The parsed payload, not the raw bytes: Socket Mode hands Bolt no raw body. Key
        # order is fixed so the same payload always has the same digest.
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
        return Delivery(kind=PAYLOAD, id=hashlib.sha256(canonical.encode()).hexdigest(),
                        retried=retried)
    return None


def once(deliveries: Deliveries) -> Middleware:
    async def drop_repeats(req: AsyncBoltRequest, resp: BoltResponse,
                           next: Callable[[], Awaitable[None]]) -> BoltResponse | None:
        delivery = delivery_of(req.body, req.headers)
        if delivery is not None:
            try:
                first = await deliveries.first(delivery)
            except (SQLAlchemyError, OSError) as exc:
                # The database is out: better to act (the listener says what is wrong) than
                # to drop what may be the only delivery.
                log.warning("could not record a Slack delivery, acting on it anyway: %s",
                            type(exc).__name__)
                first = True
            if not first:
                log.debug("dropped a repeated Slack delivery (%s %s, retry %s)",
                          delivery.kind, delivery.id[:16],
                          (req.headers.get(RETRY_NUM) or ["-"])[0])
                return BoltResponse(status=200, body="")
        await next()
        return None

    return drop_repeats
