"""One place that turns a failure inside a listener into what the person is told.

Registered as Bolt's error handler: a `DomainError` becomes its ephemeral message (with the
usage line when the input was wrong); anything unexpected is logged once with a short reference
the person can quote, and they see only that reference — never a traceback.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from slack_bolt.context.respond.async_respond import AsyncRespond
from slack_sdk.web.async_client import AsyncWebClient

from bot.domain.errors import DomainError, InvalidCommand
from bot.slack.blocks.common import error_message, notice
from bot.slack.blocks.message import Message

log = logging.getLogger(__name__)


def message_for(error: Exception) -> Message:
    if isinstance(error, InvalidCommand):
        return error_message(error.user_message, usage=error.usage)
    if isinstance(error, DomainError):
        return notice(error.user_message)
    if isinstance(error, StaleReference):
        return notice("That button is no longer valid; use the newest message.")
    ref = uuid.uuid4().hex[:8]
    log.error("unhandled error in a Slack listener (ref %s)", ref, exc_info=error)
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
    if user:
        opened = await client.conversations_open(users=user)
        await client.chat_postMessage(channel=opened["channel"]["id"], **message.as_kwargs())


async def on_error(error: Exception, body: dict[str, Any], respond: AsyncRespond | None,
                   client: AsyncWebClient) -> None:
    try:
        await reply_privately(message_for(error), body=body, respond=respond, client=client)
    except Exception:  # telling them failed too: the log line above is what remains
        log.exception("could not deliver an error reply")
