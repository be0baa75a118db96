"""Which sweeps run now and when each last finished: what readiness (bot/health.py) reads and
what a graceful stop (bot/runtime.py) waits for."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field


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
    # Told how long each run took (the metrics' sweep histogram).
    observe: Callable[[str, float], None] | None = None
    _idle: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self._idle.set()

    def begin(self) -> None:
        self.running += 1
        self._idle.clear()

    def end(self, name: str, *, seconds: float | None = None) -> None:
        self.finished[name] = time.monotonic()
        if self.observe is not None and seconds is not None:
            self.observe(name, seconds)
        self.running -= 1
        if self.running == 0:
            self._idle.set()

    async def idle(self) -> None:
        await self._idle.wait()

    def age(self, name: str) -> float:
        """Seconds since `name` last finished (since the scheduler started, if never)."""
        return time.monotonic() - self.finished.get(name, self.started_at)
