"""The cyclic garbage collector under `cluster-bot serve`: full collections wait for a lull in
Slack's requests, for at most MAX_WAIT_SECONDS.

A full (generation 2) collection walks every object the process keeps, and every ack in flight
waits it out. CPython starts one once 10 second-generation collections have run since the last
and the objects moved to the oldest generation since then are a quarter of what it kept. Under
a burst what grows is live, not garbage: the acked requests waiting for a work slot
(bot/slack/inflight.py `WorkSlots`), ~90 objects each (Bolt's request, context, client, ack,
say, respond and response, tasks, coroutines) — 459,000 unfrozen objects for 5,165 waiting
requests — so the quarter is met every few seconds. In `SCALE_ONLY=acks python -m benchmarks
scale` that was 33–51 full collections in 4.5 minutes, each freeing 0–400 objects and pausing
the loop 20 ms – 1 s (2.9 s on a loaded machine) as the backlog grew: the ack tail.

So `serve` runs with `Collector`: the young generations collect at CPython's thresholds (their
pauses stay short; with a first threshold of 10,000, not 700, the second generation's were ~4×
longer in the burst benchmark), automatic full collections never, and `check()` (every
CHECK_SECONDS on the loop) makes a full collection once one is due by CPython's count
(FULL_AFTER second-generation collections since the last) in a lull — no request waiting for
its ack and none arrived for QUIET_SECONDS — or MAX_WAIT_SECONDS after it became due, busy or
not: the bound on how long garbage cycles pile up (reference counting frees all else at once;
what a minute of load leaves is a few thousand objects).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)

FULL_AFTER = 10  # second-generation collections after which a full one is due (CPython's)
NEVER = 2**31 - 1  # a threshold the count never passes: no automatic full collection
CHECK_SECONDS = 0.1
QUIET_SECONDS = 1.0
MAX_WAIT_SECONDS = 60.0


class Collector:
    """When a full collection runs. `quiet(now, for_seconds)`: no request is waiting for its
    ack and none came in during the last `for_seconds` (bot/slack/app.py `AckingApp.quiet`)."""

    def __init__(self, quiet: Callable[[float, float], bool], *,
                 clock: Callable[[], float] = time.monotonic,
                 collect: Callable[[int], int] = gc.collect,
                 count: Callable[[], tuple[int, int, int]] = gc.get_count,
                 max_wait: float = MAX_WAIT_SECONDS) -> None:
        self._quiet = quiet
        self._clock = clock
        self._collect = collect
        self._count = count
        self._max_wait = max_wait
        self._due_since: float | None = None
        self.in_lulls = 0  # full collections made in a lull, and at the bound while busy
        self.at_bound = 0

    def check(self) -> bool:
        """Make a full collection if one is due and the time is right; whether it did."""
        if self._count()[2] < FULL_AFTER:
            return False
        now = self._clock()
        if self._due_since is None:
            self._due_since = now
        waited = now - self._due_since
        lull = self._quiet(now, QUIET_SECONDS)
        if not lull and waited < self._max_wait:
            return False
        self._due_since = None
        freed = self._collect(2)
        seconds = self._clock() - now
        if lull:
            self.in_lulls += 1
        else:
            self.at_bound += 1
        log.debug("full garbage collection %s: %d objects freed in %.0f ms",
                  "in a lull" if lull else f"after waiting {waited:.0f} s for a lull", freed,
                  seconds * 1000)
        return True

    @contextmanager
    def serving(self, loop: asyncio.AbstractEventLoop) -> Iterator[None]:
        """The collector on (off since bot/__main__.py) without automatic full collections,
        and `check()` every CHECK_SECONDS on `loop`; CPython's thresholds back on the way out.

        What start-up built (modules, schemas, table metadata: most of the heap) never becomes
        garbage: frozen first, no collection walks it again. Frozen without collecting: a full
        collection here costs ~80 ms of start-up to free ~2,000 objects."""
        before = young, middle, _ = gc.get_threshold()
        gc.freeze()
        gc.set_threshold(young, middle, NEVER)
        gc.enable()
        handle: asyncio.TimerHandle | None = None

        def tick() -> None:
            nonlocal handle
            self.check()
            handle = loop.call_later(CHECK_SECONDS, tick)

        handle = loop.call_later(CHECK_SECONDS, tick)
        try:
            yield
        finally:
            handle.cancel()
            gc.set_threshold(*before)
