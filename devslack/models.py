"""The records devslack keeps and hands out: people, messages, calls, and Slack's refusals."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

ACK_DEADLINE = 3.0  # seconds Slack waits for the HTTP 200 to anything it sends an app


class SlackError(Exception):
    """A Web API refusal, answered as `{"ok": false, "error": code}` (+ `detail`)."""

    def __init__(self, code: str, detail: str | None = None) -> None:
        super().__init__(code if detail is None else f"{code}: {detail}")
        self.code = code
        self.detail = detail


@dataclass(frozen=True)
class SlackUser:
    """A person in the fake workspace (what `users.info` answers)."""

    id: str
    name: str
    real_name: str = ""
    tz: str = "UTC"
    is_admin: bool = False
    is_restricted: bool = False  # a multi-channel guest
    is_ultra_restricted: bool = False  # a single-channel guest

    def to_wire(self, *, team_id: str, now: datetime) -> dict[str, Any]:
        offset = ZoneInfo(self.tz).utcoffset(now)
        real_name = self.real_name or self.name
        return {
            "id": self.id,
            "team_id": team_id,
            "name": self.name,
            "real_name": real_name,
            "deleted": False,
            "tz": self.tz,
            "tz_offset": int(offset.total_seconds()) if offset is not None else 0,
            "is_admin": self.is_admin,
            "is_owner": False,
            "is_bot": False,
            "is_restricted": self.is_restricted or self.is_ultra_restricted,
            "is_ultra_restricted": self.is_ultra_restricted,
            "profile": {
                "real_name": real_name,
                "display_name": self.name,
                "email": f"{self.name}@example.com",
            },
        }


DEFAULT_USERS = (
    SlackUser("U0ALICE", "alice", "Alice Archer", tz="Europe/London"),
    SlackUser("U0BOB", "bob", "Bob Baker", tz="America/New_York"),
    SlackUser("U0CAROL", "carol", "Carol Chen", tz="Asia/Tokyo", is_admin=True),
)
DEFAULT_CHANNELS: Mapping[str, str] = {"C0GENERAL": "general", "C0RANDOM": "random"}


@dataclass(frozen=True)
class MessageVersion:
    """What a message said before a `chat.update` (or response_url replace) changed it."""

    text: str
    blocks: list[dict[str, Any]]
    replaced_at: datetime


@dataclass
class Message:
    """A message as Slack stores it. Mutable: `chat.update` edits it in place."""

    channel: str
    ts: str
    text: str
    blocks: list[dict[str, Any]]
    user: str
    posted_at: datetime
    via: str  # the method that made it: chat.postMessage, response_url, ack, …
    thread_ts: str | None = None
    reply_broadcast: bool = False
    ephemeral_to: str | None = None
    deleted: bool = False
    edits: list[MessageVersion] = field(default_factory=list)
    edited_ts: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # attachments, metadata, … kept raw

    @property
    def is_reply(self) -> bool:
        return self.thread_ts is not None and self.thread_ts != self.ts

    def to_payload(self, *, team_id: str, bot_id: str, app_id: str) -> dict[str, Any]:
        """The `message` object Slack puts in a block_actions payload."""
        body: dict[str, Any] = {
            "type": "message",
            "user": self.user,
            "ts": self.ts,
            "bot_id": bot_id,
            "app_id": app_id,
            "text": self.text,
            "team": team_id,
            "blocks": copy.deepcopy(self.blocks),
        }
        if self.thread_ts is not None:
            body["thread_ts"] = self.thread_ts
        if self.edited_ts is not None:
            body["edited"] = {"user": self.user, "ts": self.edited_ts}
        return body


@dataclass
class Trigger:
    """A trigger_id Slack handed out: whose it is, when, and whether it was used."""

    user_id: str
    issued: datetime
    used: bool = False
    team_id: str | None = None  # the workspace the request it came with was from


@dataclass
class ResponseTarget:
    """Where a response_url answers: the payload's channel, user and (for actions) message."""

    channel_id: str
    user_id: str
    issued: datetime
    message_ts: str | None = None
    uses: int = 0


@dataclass(frozen=True)
class Violation:
    """A payload Slack would have refused: which method, why, and what was sent."""

    method: str
    problems: tuple[str, ...]
    payload: Any
    at: datetime


@dataclass(frozen=True)
class ApiCall:
    """One request FakeSlack answered.

    `method` is a Web API method name, or `response_url` (a POST to a response_url), or `ack`
    (an ack body Slack acts on: a slash command's reply, a view_submission's response_action),
    or `scheduled_message` (a `chat.scheduleMessage` message posted when its time came).
    """

    method: str
    args: dict[str, Any]
    token: str | None
    at: datetime
    status: int
    response: dict[str, Any]

    @property
    def ok(self) -> bool:
        return bool(self.response.get("ok"))

    @property
    def error(self) -> str | None:
        error = self.response.get("error")
        return None if error is None else str(error)
