"""Slack calls paced to Slack's limits, by lane, with one shared pause per 429.

Slack limits `chat.postMessage` to about one post per second per channel (plus a workspace cap)
and `chat.update` to Tier 3 (~50/min per workspace). A storm asks for far more. Sending it all
and letting each call back off alone on its 429 (what slack_sdk's retry handler does) wastes
calls and lets a reminder go before an approval card. Here every call first takes a turn:

- a *key* is (method, channel) — and (method, "*") where the method has a workspace limit;
  each key lets one call through per interval (the limit, plus a small margin for jitter);
- among the calls waiting on a key, the lowest lane goes first (bot/domain/lanes.py), then the
  oldest: an approval card waits at most for the call already on the wire;
- a 429 pauses its (method, channel) key for `Retry-After` — once, shared by every call
  waiting on it (a second 429 in the same window only extends the same pause), and the call
  tries again after it. After `IN_CALL_TRIES` refusals the error is raised: the outbox keeps
  the post and a later delivery pass tries again (never given up).

Limits are a setting (`SLACK_RATE_LIMITS`, e.g. "chat.postMessage=1/s/channel,
chat.update=50/min"); "off" sends at once, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

from bot.domain import lanes

DEFAULT_LIMITS = "chat.postMessage=1/s/channel,chat.postMessage=300/min,chat.update=50/min"
OFF = "off"
IN_CALL_TRIES = 3  # 429s one call waits out before the outbox takes it back
MARGIN = 1.05  # a little slower than the limit: arrivals jitter
_UNITS = {"s": 1.0, "min": 60.0}
ANY_CHANNEL = "*"


@dataclass(frozen=True)
class Limit:
    method: str
    per_second: float
    per_channel: bool


def parse_limits(spec: str) -> tuple[Limit, ...]:
    """`method=N/s|min[/channel]`, comma-separated; "off" or "" → none. ValueError names the
    bad part."""
    if spec.strip().lower() in ("", OFF):
        return ()
    found = []
    for part in (p.strip() for p in spec.split(",") if p.strip()):
        method, _, rate = part.partition("=")
        pieces = rate.split("/")
        try:
            count = float(pieces[0])
            unit = _UNITS[pieces[1]]
        except (ValueError, IndexError, KeyError):
            raise ValueError(f"{part!r}: expected method=N/s or method=N/min") from None
        if not method or count <= 0 or pieces[2:] not in ([], ["channel"]):
            raise ValueError(f"{part!r}: expected method=N/s[/channel]")
        found.append(Limit(method.strip(), count / unit, pieces[2:] == ["channel"]))
    return tuple(found)


@dataclass
class _Key:
    interval: float
    next_at: float = 0.0
    paused_until: float = 0.0
    waiting: list[tuple[int, int]] = field(default_factory=list)  # (lane, seq), a heap


@dataclass
class PacerStats:
    tried: int = 0  # calls sent to Slack
    held: int = 0  # calls that had to wait their turn
    refused: int = 0  # 429s answered
    pauses: int = 0  # shared pauses begun (a 429 inside a running pause only extends it)


class Pacer:
    def __init__(self, limits: tuple[Limit, ...], *, now: Callable[[], float] | None = None,
                 look_every: float | None = None) -> None:
        """`now`: the seconds it paces by — the event loop's clock, unless a test hands it its
        own; then each real wait lasts at most `look_every`, for a waiting call to see that
        clock move (tests move time instead of waiting for it to pass)."""
        self._time = now or (lambda: asyncio.get_running_loop().time())
        self._look_every = look_every
        self._channel = {lim.method: 1 / lim.per_second * MARGIN
                         for lim in limits if lim.per_channel}
        self._method = {lim.method: 1 / lim.per_second * MARGIN
                        for lim in limits if not lim.per_channel}
        self._keys: dict[tuple[str, str], _Key] = {}
        self._seq = itertools.count()
        self._changed = asyncio.Condition()
        self.stats = PacerStats()

    def _key(self, method: str, channel: str) -> _Key:
        key = self._keys.get((method, channel))
        if key is None:
            interval = (self._method.get(method, 0.0) if channel == ANY_CHANNEL
                        else self._channel.get(method, 0.0))
            key = self._keys[(method, channel)] = _Key(interval)
        return key

    async def acquire(self, method: str, channel: str | None, lane: lanes.Lane) -> None:
        """Wait for this call's turn on its channel's key, then on the method's."""
        held = False
        keys = [self._key(method, channel or ANY_CHANNEL)]
        if method in self._method and channel is not None:
            keys.append(self._key(method, ANY_CHANNEL))
        for key in keys:
            held |= await self._turn(key, (int(lane), next(self._seq)))
        self.stats.tried += 1
        self.stats.held += held

    async def _turn(self, key: _Key, ticket: tuple[int, int]) -> bool:
        heapq.heappush(key.waiting, ticket)
        waited = False
        async with self._changed:
            try:
                while True:
                    now = self._time()
                    ready = max(key.next_at, key.paused_until)
                    if key.waiting[0] == ticket and ready <= now:
                        break
                    waited = True
                    timeout = ready - now if key.waiting[0] == ticket else None
                    if timeout is not None and self._look_every is not None:
                        timeout = min(timeout, self._look_every)
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._changed.wait(), timeout)
            except BaseException:
                key.waiting.remove(ticket)
                heapq.heapify(key.waiting)
                self._changed.notify_all()
                raise
            heapq.heappop(key.waiting)
            key.next_at = self._time() + key.interval
            self._changed.notify_all()
        return waited

    async def pause(self, method: str, channel: str | None, seconds: float) -> None:
        """Slack said 429: every call on (method, channel) waits `seconds`, together."""
        key = self._key(method, channel or ANY_CHANNEL)
        now = self._time()
        self.stats.refused += 1
        if key.paused_until <= now:
            self.stats.pauses += 1
        key.paused_until = max(key.paused_until, now + seconds)
        async with self._changed:
            self._changed.notify_all()


def retry_after(response: Any) -> float:
    """Slack's `Retry-After` in seconds (1 if it didn't say)."""
    headers: Mapping[str, Any] = getattr(response, "headers", None) or {}
    for name, value in headers.items():
        if name.lower() == "retry-after":
            value = value[0] if isinstance(value, list) and value else value
            try:
                return max(float(value), 0.0)
            except (TypeError, ValueError):
                break
    return 1.0


def _channel(kwargs: Mapping[str, Any]) -> str | None:
    for part in ("json", "params", "data"):
        args = kwargs.get(part)
        if isinstance(args, Mapping) and args.get("channel"):
            return str(args["channel"])
    return None


class PacedWebClient(AsyncWebClient):
    """A Web API client that, given a `pacer`, takes a turn before each call (runtime.py
    puts the metrics' counting on top)."""

    pacer: Pacer | None = None

    async def api_call(self, api_method: str, **kwargs: Any) -> AsyncSlackResponse:
        pacer = self.pacer
        if pacer is None:
            return await super().api_call(api_method, **kwargs)
        channel = _channel(kwargs)
        for attempt in itertools.count(1):
            await pacer.acquire(api_method, channel, lanes.current())
            try:
                return await super().api_call(api_method, **kwargs)
            except SlackApiError as exc:
                if getattr(exc.response, "status_code", None) != 429:
                    raise
                await pacer.pause(api_method, channel, math.ceil(retry_after(exc.response)))
                if attempt >= IN_CALL_TRIES:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover
