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
  recorded too — but it acts whatever the database says, so its ack never waits for the
  INSERT: the key is written right after the ack, and the listener's work after its ack waits
  for it (bot/slack/inflight.py's `AckFirst`), so nothing acts before a later retry can find
  it. (Before, that INSERT stood between every command and its ack: in a burst of 200 on
  PostgreSQL the commands queued for pooled connections behind the listeners' own work, 88 of
  160 past Slack's 3 s, while clicks, which record nothing, all acked under 1 s.)
- not button presses (`block_actions`): each is claimed by what it acts on (bot/services/
  claims.py), which also refuses a repeat and tells the presser; nor type-ahead lookups
  (`block_suggestion`), which change nothing.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from sqlalchemy.exc import SQLAlchemyError

from bot.domain.claims import EVENT, PAYLOAD, Delivery
from bot.domain.errors import StorageUnavailable
from bot.services.deliveries import Deliveries
from bot.slack.acks_first import after_ack
from bot.slack.inflight import ACK_SENT, RECORDED, InFlight

log = logging.getLogger(__name__)

RETRY_NUM = "x-slack-retry-num"
_ACTING_PAYLOADS = frozenset({"view_submission", "shortcut", "message_action"})

Middleware = Callable[[AsyncBoltRequest, BoltResponse, Callable[[], Awaitable[None]]],
                      Awaitable[BoltResponse | None]]


def delivery_of(body: dict[str, Any], headers: dict[str, Any]) -> Delivery | None:
    """What names this request among Slack's deliveries; None for what is never deduplicated."""
    retried = bool(headers.get(RETRY_NUM))
    if body.get("type") == "event_callback":
        event_id = body.get("event_id")
        return Delivery(kind=EVENT, id=event_id, retried=retried) \
            if isinstance(event_id, str) and event_id else None
    if _named_by_payload(body):
        # The parsed payload, not the raw bytes: Socket Mode hands Bolt no raw body. Key
        # order is fixed so the same payload always has the same digest.
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
        return Delivery(kind=PAYLOAD, id=hashlib.sha256(canonical.encode()).hexdigest(),
                        retried=retried)
    return None


def _named_by_payload(body: dict[str, Any]) -> bool:
    """A slash command, a modal submission or a shortcut: named by a digest of its payload."""
    kind = body.get("type")  # anything at all in a fuzzed payload
    return kind != "event_callback" and (
        "command" in body or (isinstance(kind, str) and kind in _ACTING_PAYLOADS))


def once(deliveries: Deliveries, inflight: InFlight) -> Middleware:
    after: set[asyncio.Task[None]] = set()

    async def record(req: AsyncBoltRequest) -> None:
        """After the ack: the first delivery's key, for a later retry to find (its digest made
        here too: nothing before the ack needs it)."""
        try:
            sent = req.context.get(ACK_SENT)
            if isinstance(sent, asyncio.Event):
                await sent.wait()
            after_ack()
            delivery = delivery_of(req.body, req.headers)
            assert delivery is not None  # a payload's, by drop_repeats
            await deliveries.remember(delivery)
        except StorageUnavailable:
            # The outage itself is told once, by storage.outages; a line per delivery is noise.
            log.info("could not record a Slack delivery while the database is out (a retry "
                     "of it would act again)")
        except (SQLAlchemyError, OSError) as exc:
            log.warning("could not record a Slack delivery (a retry of it would act again): "
                        "%s", type(exc).__name__)
        except Exception:
            log.exception("could not record a Slack delivery")
        finally:
            inflight.finished()

    async def drop_repeats(req: AsyncBoltRequest, resp: BoltResponse,
                           next: Callable[[], Awaitable[None]]) -> BoltResponse | None:
        if not req.headers.get(RETRY_NUM) and _named_by_payload(req.body):
            # A first delivery: it acts whatever is recorded, so it is recorded after the ack,
            # before the listener's work.
            inflight.started()
            task = asyncio.create_task(record(req))
            after.add(task)
            task.add_done_callback(after.discard)
            req.context[RECORDED] = task
            await next()
            return None
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
