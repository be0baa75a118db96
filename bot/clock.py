"""Time, passed in: the only module that reads the wall clock.

Services, the watcher and the simulator take a `Clock`; tests hand them a `ManualClock`
and move it forward instead of sleeping.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    """Something that says what time it is (always aware UTC)."""

    def now(self) -> datetime: ...


class SystemClock:
    """The real wall clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class ManualClock:
    """A clock that only moves when told to: the simulator's virtual clock and the tests' clock."""

    def __init__(self, start: datetime | None = None) -> None:
        start = start or datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
        if start.tzinfo is None:
            raise ValueError("ManualClock needs an aware datetime")
        self._now = start.astimezone(UTC)

    def now(self) -> datetime:
        return self._now

    def advance(self, seconds: float) -> datetime:
        if seconds < 0:
            raise ValueError("a clock does not go backwards")
        self._now += timedelta(seconds=seconds)
        return self._now

    def set(self, when: datetime) -> None:
        if when.tzinfo is None:
            raise ValueError("aware datetimes only")
        if when < self._now:
            raise ValueError("a clock does not go backwards")
        self._now = when.astimezone(UTC)


class OffsetClock:
    """Real time plus a jump: seconds still tick, and `advance()` skips hours (the local demo)."""

    def __init__(self, base: Clock | None = None) -> None:
        self._base = base or SystemClock()
        self._offset = timedelta()

    def now(self) -> datetime:
        return self._base.now() + self._offset

    def advance(self, seconds: float) -> datetime:
        if seconds < 0:
            raise ValueError("a clock does not go backwards")
        self._offset += timedelta(seconds=seconds)
        return self.now()
