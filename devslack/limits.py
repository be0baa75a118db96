"""Slack's rate limits, enforced by the fake: per channel and per method, with Retry-After.

    FakeSlack(rate_limits="chat.postMessage=1/s/channel,chat.update=50/min")

Each limit is "at most N calls in any window" — one second for `N/s`, a minute for `N/min` —
counted per (method, channel) with `/channel` (Slack's ~1 post/s/channel) and per method
otherwise (a Tier's per-workspace budget). A call over a limit is not performed: it is
answered HTTP 429 `ratelimited` with `Retry-After` = whole seconds until the window frees
(at least 1), as Slack does. Only calls that went through count toward the window.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

_UNITS = {"s": 1.0, "min": 60.0}


@dataclass(frozen=True)
class RateLimit:
    method: str
    calls: int
    window: float
    per_channel: bool


def parse(spec: str) -> tuple[RateLimit, ...]:
    """`method=N/s|min[/channel]`, comma-separated (the bot's SLACK_RATE_LIMITS syntax)."""
    found = []
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        method, _, rate = part.partition("=")
        pieces = rate.split("/")
        if len(pieces) not in (2, 3) or pieces[1] not in _UNITS or not pieces[0].isdigit() \
                or pieces[2:] not in ([], ["channel"]):
            raise ValueError(f"{part!r}: expected method=N/s[/channel] or method=N/min")
        found.append(RateLimit(method, int(pieces[0]), _UNITS[pieces[1]],
                               pieces[2:] == ["channel"]))
    return tuple(found)


class RateLimits:
    def __init__(self, spec: str = "", *, now: Callable[[], float] = time.monotonic) -> None:
        self.limits = parse(spec)
        self._now = now
        self._seen: dict[tuple[str, str, float], deque[float]] = {}
        self.refused = 0  # 429s answered

    def check(self, method: str, channel: str | None) -> int | None:
        """None when the call may go (and it is counted); else the Retry-After seconds."""
        now = self._now()
        windows = []
        for limit in self.limits:
            if limit.method != method:
                continue
            scope = (channel or "") if limit.per_channel else "*"
            seen = self._seen.setdefault((scope, method, limit.window), deque())
            while seen and seen[0] <= now - limit.window:
                seen.popleft()
            if len(seen) >= limit.calls:
                self.refused += 1
                return max(1, math.ceil(seen[0] + limit.window - now))
            windows.append(seen)
        for seen in windows:
            seen.append(now)
        return None
