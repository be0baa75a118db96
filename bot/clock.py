"""Time, passed in: the only module that reads the wall clock.

Services, the watcher and the simulator take a `Clock`; tests hand them a `ManualClock`
and move it forward instead of sleeping.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
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


class ProviderClock:
    """AI Reserve's time, as the bot's host can tell it: the host clock plus an offset measured
    from the provider's `Date` header on every answer (`observe`, called by the client's
    transport). Provider deadlines — quote expiry, envelope hours, reminders, payment grace —
    are judged on this clock, so a bot host whose clock is minutes off neither refuses a valid
    quote nor terminates late.

    `Date` has whole seconds (truncated), so an offset under a second is not measurable: the
    estimate is the header's time plus half a second, taken at the middle of the exchange, and
    only an estimate at least `RESOLUTION` away from the current offset replaces it.
    """

    RESOLUTION = timedelta(seconds=1)

    def __init__(self, host: Clock | None = None) -> None:
        self._host = host or SystemClock()
        self.offset = timedelta()
        # Host time of the last answer whose `Date` was read (None: none yet). Between answers
        # the estimate runs at the host's rate, and AI Reserve's clock need not (a corrected
        # clock, a paused VM, a simulator): a money deadline asks `read_since` first.
        self.read_at: datetime | None = None

    def now(self) -> datetime:
        return self._host.now() + self.offset

    def host_now(self) -> datetime:
        """The host's own clock (to time an exchange with)."""
        return self._host.now()

    def read_since(self, host_instant: datetime) -> bool:
        """Whether an answer's `Date` was read after `host_instant` (host time)."""
        return self.read_at is not None and self.read_at > host_instant

    def observe(self, date_header: str | None, *, sent_at: datetime) -> None:
        """An answer carrying `Date: <date_header>` arrived; the request left at `sent_at`
        (host time). A missing or malformed header changes nothing."""
        if not date_header:
            return
        try:
            provider = parsedate_to_datetime(date_header)
        except (TypeError, ValueError, IndexError):
            return
        if provider.tzinfo is None:
            return
        received = self._host.now()
        middle = sent_at + (received - sent_at) / 2
        estimate = provider + timedelta(milliseconds=500) - middle
        if abs(estimate - self.offset) >= self.RESOLUTION:
            self.offset = estimate
        self.read_at = received


def host_time(clock: Clock) -> datetime:
    """The host's own time: `clock`'s, less a provider's offset (`ProviderClock`). What Slack's
    timestamps and the bot's own rechecks are judged by — never AI Reserve's clock."""
    host_now = getattr(clock, "host_now", None)
    return host_now() if callable(host_now) else clock.now()
