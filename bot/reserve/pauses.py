"""Route pauses: what AI Reserve said about waiting, remembered between calls (and sweeps).

Two sources, both kept per route (`"GET /clusters/{id}"`: ids folded, so every cluster's GET is
one route):

- a `Retry-After` on a 429 or 503 pauses that route until it has passed;
- the `RateLimit` header (IETF structured fields, contract §7) names the quota policies that apply
  to the route and what remains of each; a policy at `r=0` pauses every route it applies to for
  its `t` seconds — so the next call waits instead of spending a 429.

`Transport.send` asks `left(route)` before each attempt and refuses locally (a `RateLimited`
carrying the seconds left, `details["window"] == "paused"`) while a pause holds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime, timedelta

from bot.clock import Clock
from bot.reserve.errors import ApiError, RateLimited, ServerError

_ID_SEGMENT = re.compile(r"^[^/]*(?:_|\d)[^/]*$")
_ITEM = re.compile(r'^\s*"?(?P<name>[^";]+)"?(?P<params>(?:\s*;\s*[a-z]+=[^;,]*)*)\s*$')
_PARAM = re.compile(r";\s*(?P<key>[a-z]+)=(?P<value>[^;,]*)")
PAUSED = "paused"


def route_of(method: str, path: str) -> str:
    """`DELETE /clusters/clu_9x` → `DELETE /clusters/{id}`."""
    segments = ["{id}" if _ID_SEGMENT.match(s) else s for s in path.split("?")[0].split("/")]
    return f"{method.upper()} {'/'.join(segments)}"


def rate_limit_items(header: str | None) -> list[tuple[str, int | None, float | None]]:
    """`"minute";r=0;t=37, "launch";r=9;t=60` → [("minute", 0, 37.0), ("launch", 9, 60.0)];
    items that don't parse are skipped (a server's typo must not stop the bot)."""
    found: list[tuple[str, int | None, float | None]] = []
    for raw in (header or "").split(","):
        match = _ITEM.match(raw)
        if match is None or not match["name"].strip():
            continue
        params = {m["key"]: m["value"].strip() for m in _PARAM.finditer(match["params"])}
        remaining = params.get("r", "")
        reset = params.get("t", "")
        found.append((match["name"].strip(),
                      int(remaining) if remaining.isdigit() else None,
                      float(reset) if reset.isdigit() else None))
    return found


class RoutePauses:
    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._routes: dict[str, datetime] = {}
        self._policies: dict[str, datetime] = {}
        self._policies_of: dict[str, set[str]] = {}

    def left(self, route: str) -> float:
        """Seconds the route must still wait (0: go)."""
        now = self._clock.now()
        ends = [self._routes.get(route)]
        ends += [self._policies.get(name) for name in self._policies_of.get(route, ())]
        latest = max((e for e in ends if e is not None), default=None)
        return max(0.0, (latest - now).total_seconds()) if latest is not None else 0.0

    def refusal(self, route: str, seconds: float) -> RateLimited:
        return RateLimited(
            f"{route} is paused: AI Reserve asked us to wait {seconds:.0f} s more.",
            retry_after=seconds, details={"window": PAUSED, "route": route},
        )

    def observe(self, route: str, *, headers: Mapping[str, str] | None,
                error: ApiError | None) -> None:
        """Remember what one answer says about waiting (headers: None when there was none)."""
        now = self._clock.now()
        retry_after = getattr(error, "retry_after", None) \
            if isinstance(error, RateLimited | ServerError) else None
        if retry_after:
            self._extend(self._routes, route, now + timedelta(seconds=retry_after))
        if headers is None:
            return
        items = rate_limit_items(headers.get("RateLimit"))
        if items:
            self._policies_of[route] = {name for name, _, _ in items}
        for name, remaining, reset in items:
            if remaining == 0 and reset:
                self._extend(self._policies, name, now + timedelta(seconds=reset))

    @staticmethod
    def _extend(table: dict[str, datetime], key: str, until: datetime) -> None:
        if key not in table or table[key] < until:
            table[key] = until
