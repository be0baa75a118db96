"""What a sender that posts through the outbox is built with, said once (duty notices, storm
digests)."""

from __future__ import annotations

from slack_sdk.web.async_client import AsyncWebClient

from bot.clock import Clock
from bot.slack.outbox import SlackOutbox
from storage.db import Database


class OutboxSender:
    """Base of a sender that claims its posts in the outbox before it sends them."""

    def __init__(self, *, client: AsyncWebClient, db: Database, outbox: SlackOutbox,
                 clock: Clock) -> None:
        self._client = client
        self._db = db
        self._outbox = outbox
        self._clock = clock
