"""One place that turns a failure inside a listener into what the person is told.

Every listener is wrapped with `@answering`: a `DomainError` becomes its ephemeral message (with
the usage line when the input was wrong); anything unexpected is logged once with a short
reference the person can quote, and they see only that reference — never a traceback. A
database outage (`StorageUnavailable`: disk full, unreachable, read-only) is told in words, and
so is a form Slack refused to open because the bot took longer than Slack's 3 s
(`expired_trigger_id`: a busy bot, not a fault to quote).

Why a wrapper and not Bolt's `@app.error`: when a listener raises after it acked, Bolt resets
the ack it already gave and answers Slack 404 ("unhandled request") if that happens within its
10 ms polling window. Catching inside the listener keeps the ack and the 200.
"""

from __future__ import annotations

import inspect
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.context.respond.async_respond import AsyncRespond
from slack_bolt.kwargs_injection.async_args import AsyncArgs
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.domain.errors import DomainError, InvalidCommand, StorageUnavailable
from bot.logs import log_context
from bot.slack.acks_first import after_ack
from bot.slack.answers import NoAnswer
from bot.slack.blocks.common import error_message, notice
from bot.slack.blocks.message import Message
from bot.slack.inflight import ACK_SENT, RECORDED, WORK_SLOTS, AckFirst

log = logging.getLogger(__name__)

Listener = Callable[..., Awaitable[None]]


def message_for(error: Exception) -> Message:
    if isinstance(error, InvalidCommand):
        return error_message(error.user_message, usage=error.usage)
    if isinstance(error, DomainError):
        return notice(error.user_message)
    if isinstance(error, StorageUnavailable):  # an outage, logged once where it is seen
        return notice(error.user_message)  # (storage/outages.py): no reference, no traceback
    if isinstance(error, StaleReference):
        return notice("That button is no longer valid; use the newest message.")
    if isinstance(error, SlackApiError) and error.response.get("error") == "expired_trigger_id":
        log.warning("a form opened later than Slack allows (expired_trigger_id): the bot took "
                    "over 3 s between the click and views.open")
        return notice("Slack gives an app 3 seconds to open a form, and this one took longer "
                      "(the bot is busy). Nothing was changed: press the button again.")
    ref = uuid.uuid4().hex[:8]
    with log_context(error_ref=ref):
        log.error("unhandled error in a Slack listener (ref %s)", ref, exc_info=error)
    if isinstance(error, NoAnswer):  # Slack may have done it: never "nothing changed"
        return notice(f"Slack didn't answer us clearly, so part of this may have gone through: "
                      f"look before you try again. If it persists, give an admin this "
                      f"reference: `{ref}`.")
    return notice(f"Something went wrong on our side; nothing more was changed. "
                  f"If it persists, give an admin this reference: `{ref}`.")


class StaleReference(ValueError):
    """A button value or private_metadata that doesn't unpack (old or forged)."""


async def reply_privately(message: Message, *, body: dict[str, Any], respond: AsyncRespond | None,
                          client: AsyncWebClient) -> None:
    """Ephemeral via response_url when Slack gave one; else a DM (modal submissions)."""
    if respond is not None and body.get("response_url"):
        await respond(**message.as_kwargs(), response_type="ephemeral", replace_original=False)
        return
    user = (body.get("user") or {}).get("id") or body.get("user_id")
    if user:  # a user id as the channel: Slack posts it in the App Home Messages tab (no
        # conversations.open, a Tier 3 call, for a one-off answer)
        await client.chat_postMessage(channel=user, **message.as_kwargs())


def answering(func: Listener) -> Callable[[AsyncArgs], Awaitable[None]]:
    """Wrap a listener: Bolt injects `args`; the listener gets the names it declares, its `ack`
    returning once the answer has left (bot/slack/inflight.py)."""
    names = inspect.getfullargspec(func).args

    async def listener(args: AsyncArgs) -> None:
        context = args.context
        ack = AckFirst(args.ack, context.get(ACK_SENT), context.get(RECORDED),
                       context.get(WORK_SLOTS))
        try:
            await func(**{name: ack if name == "ack" else getattr(args, name) for name in names})
        except Exception as exc:
            if args.ack.response is None:  # failed before its ack: Slack still gets a 200
                await args.ack()
                after_ack()
            await on_error(exc, args.body, args.respond, args.client)
        finally:
            ack.release()

    listener.__name__ = listener.__qualname__ = func.__name__
    return listener


async def on_error(error: Exception, body: dict[str, Any], respond: AsyncRespond | None,
                   client: AsyncWebClient) -> None:
    try:
        await reply_privately(message_for(error), body=body, respond=respond, client=client)
    except Exception:  # telling them failed too: the log line above is what remains
        log.exception("could not deliver an error reply")
