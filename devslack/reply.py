"""`Reply`: the bot's HTTP answer to one request `SlackRequests` sent — what Slack acts on, and
what went wrong with it as Slack would show it (the terminal and the browser page both say it)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from devslack.models import ACK_DEADLINE


@dataclass(frozen=True)
class Reply:
    """The bot's HTTP answer to one request, and how long it took (wall time, seconds)."""

    status: int
    body: str
    content_type: str
    elapsed: float

    @property
    def json(self) -> Any:
        """The body parsed as JSON, or None when it is text (or empty)."""
        if "json" not in self.content_type or not self.body:
            return None
        return json.loads(self.body)

    @property
    def timed_out(self) -> bool:
        return self.elapsed > ACK_DEADLINE

    @property
    def problem(self) -> str | None:
        """What went wrong with this ack, as Slack would show it; None when nothing did."""
        if self.status != 200:
            return f"⚠ the bot answered HTTP {self.status}: {self.body[:200]}"
        if self.timed_out:
            return f"⚠ the ack took {self.elapsed:.1f} s; Slack gives up after {ACK_DEADLINE:g} s"
        return None

    @property
    def content(self) -> Any:
        """What Slack acts on: the JSON object, else the text."""
        parsed = self.json
        return self.body if parsed is None else parsed
