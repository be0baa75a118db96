"""`SocketRequests`: what Slack sends an app in Socket Mode — the same payloads as
`SlackRequests`, carried as envelopes over FakeSlack's WebSocket instead of signed POSTs.

A slash command arrives as a `slash_commands` envelope whose payload is the command's fields;
clicks, submissions and closes as `interactive` envelopes; events as `events_api` envelopes
holding the whole `event_callback` (a retry counts up `retry_attempt`). The ack's payload plays
the part of the HTTP answer's body, so everything `SlackRequests` does with an answer (a slash
command's ephemeral text, a view_submission's response_action) works unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from bot.clock import Clock
from devslack.reply import Reply
from devslack.requests import SlackRequests
from devslack.socketmode import Delivery
from devslack.webapi import FakeSlack

NO_ACK = 504  # the status a Reply gets when no ack came at all
# How long an ack is waited for. A later one than Slack's 3 s is kept but marked `timed_out`
# (and not shown), exactly as `SlackRequests` treats a slow HTTP answer.
ACK_WAIT = 10.0
# interactive payloads whose ack may carry an answer (the others are acked empty)
ANSWERABLE = ("view_submission", "block_suggestion")


class SocketRequests(SlackRequests):
    def __init__(self, *, slack: FakeSlack, team_id: str | None = None,
                 clock: Clock | None = None) -> None:
        super().__init__(events_url="", signing_secret="", slack=slack, team_id=team_id,
                         clock=clock)
        self.deliveries: list[Delivery] = []

    async def _command(self, form: Mapping[str, str]) -> Reply:
        return await self._deliver("slash_commands", dict(form), answerable=True)

    async def _interactive(self, payload: Mapping[str, Any]) -> Reply:
        return await self._deliver("interactive", dict(payload),
                                   answerable=payload.get("type") in ANSWERABLE)

    async def _event(
        self, envelope: Mapping[str, Any], *, retry_num: int | None, retry_reason: str
    ) -> Reply:
        return await self._deliver("events_api", dict(envelope), answerable=False,
                                   retry_attempt=retry_num,
                                   retry_reason=retry_reason if retry_num else None)

    async def _deliver(self, kind: str, payload: dict[str, Any], *, answerable: bool,
                       retry_attempt: int | None = None, retry_reason: str | None = None
                       ) -> Reply:
        with self.slack.activity():  # in flight for FakeSlack.settle, as a POST would be
            delivery = await self.slack.socket.deliver(
                kind, payload, accepts_response_payload=answerable,
                retry_attempt=retry_attempt, retry_reason=retry_reason, within=ACK_WAIT)
        self.deliveries.append(delivery)
        if delivery.ack is None:
            return Reply(NO_ACK, "", "text/plain", delivery.elapsed)
        body = json.dumps(delivery.ack.payload) if delivery.ack.payload else ""
        return Reply(200, body, "application/json", delivery.elapsed)
