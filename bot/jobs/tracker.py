"""Which sweeps run now and when each last finished: what readiness (bot/app/health.py) reads and
what a graceful stop (bot/app/runtime.py) waits for.

Only a sweep that did its work is "finished": one that raised (AI Reserve down, the database
full) is a failure, and one skipped by a replica without the sweeps lease is nothing at all —
so the holder's figures are the ones that say whether anything is watched.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol


class HeldLease(Protocol):
    """`storage.replica.Lease`, as readiness and the metrics look at it."""

    held: bool
    since: float  # monotonic seconds: when this replica last took it


@dataclass
class Sweeps:
    """Which sweeps run now and when each last finished (monotonic seconds): for readiness and
    for a graceful stop, which waits for the running ones."""

    started_at: float = field(default_factory=time.monotonic)
    finished: dict[str, float] = field(default_factory=dict)
    running: int = 0
    # Set when the bot stops: a run the scheduler had already handed to its executor but that
    # had not begun yet must not begin (the database is about to close).
    closed: bool = False
    # Told how long each completed run took (the metrics' sweep histogram).
    observe: Callable[[str, float], None] | None = None
    # Told of each run that raised (the metrics' failure counter).
    failed: Callable[[str], None] | None = None
    # The sweeps lease this replica sweeps under; None: it sweeps unconditionally.
    lease: HeldLease | None = None
    _idle: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self._idle.set()

    @property
    def holder(self) -> bool:
        """Whether this replica is the one that must sweep now."""
        return self.lease is None or self.lease.held

    def begin(self) -> None:
        self.running += 1
        self._idle.clear()

    def end(self, name: str, *, seconds: float | None = None) -> None:
        """A run that did its work."""
        self.finished[name] = time.monotonic()
        if self.observe is not None and seconds is not None:
            self.observe(name, seconds)
        self._stop()

    def fail(self, name: str) -> None:
        """A run that raised: not finished, counted as a failure."""
        if self.failed is not None:
            self.failed(name)
        self._stop()

    def skip(self) -> None:
        """A run that did nothing (this replica doesn't hold the lease): not finished."""
        self._stop()

    def _stop(self) -> None:
        self.running -= 1
        if self.running == 0:
            self._idle.set()

    async def idle(self) -> None:
        await self._idle.wait()

    def age(self, name: str) -> float:
        """Seconds since `name` last finished — or since the scheduler started, or this replica
        took the lease, if later (a new holder gets its budget for a first sweep)."""
        since = self.finished.get(name, self.started_at)
        if self.lease is not None:
            since = max(since, self.lease.since)
        return time.monotonic() - since
