"""AI Reserve's time, read fresh for a money decision (issue 31).

The bot's estimate of AI Reserve's clock (bot.clock.ProviderClock) is the host clock plus the
offset measured from the `Date` of the last answer. Between answers it runs at the host's rate;
AI Reserve's clock need not (a corrected clock, a host that slept, a VM paused and resumed — or a
simulator moved ahead). A deadline that decides money — an enforced envelope's end, an idle
rule's grace — is judged on a reading taken since the previous decision: when no answer came
since (the watch sweep's listing was paused, slow or failed), one cheap call (`GET /health`,
no auth, no quota) is made for its `Date` before deciding NOT to act.
"""

from __future__ import annotations

import logging
from datetime import datetime

from bot.clock import Clock, ProviderClock
from bot.reserve.errors import ApiError
from bot.reserve.port import ClusterProvider

log = logging.getLogger(__name__)


class ProviderTime:
    """`now(since=…)`: AI Reserve's time on a reading taken after `since` (host time)."""

    def __init__(self, *, clock: Clock, provider: ClusterProvider) -> None:
        self._clock = clock
        self._provider = provider
        self.reads = 0  # calls made only to read the clock (tests, metrics)

    def host_now(self) -> datetime:
        """The host's clock (to say `since` with); the clock itself when it is not an estimate."""
        clock = self._clock
        return clock.host_now() if isinstance(clock, ProviderClock) else clock.now()

    async def now(self, *, since: datetime | None) -> datetime:
        """AI Reserve's time, from an answer read after `since` (None: any answer): when
        there is none, `GET /health` first. A clock that is not an estimate (a test's) is
        exact. A failed read leaves the estimate — the decision goes on with the best known —
        and is logged: the same trouble fails the terminate, and the next sweep reads again."""
        clock = self._clock
        if not isinstance(clock, ProviderClock):
            return clock.now()
        stale = clock.read_at is None if since is None else not clock.read_since(since)
        if stale:
            self.reads += 1
            try:
                await self._provider.health()
            except ApiError as exc:
                log.warning("reading AI Reserve's clock failed (%s); deciding on the estimate "
                            "from %s", exc.code, clock.read_at)
        return clock.now()
