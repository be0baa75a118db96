"""Per-key request quotas for the simulator server (contract §7 "Rate limits").

Fixed windows that open on the first request and last `window` seconds, measured on the
ENGINE's clock — so a test moves them with the virtual clock instead of waiting.

Quotas are reported in the IETF structured-field form RunPod uses:

    RateLimit-Policy: "launch";q=10;w=60, "minute";q=120;w=60
    RateLimit: "launch";r=9;t=60, "minute";r=119;t=60

Both lists carry every policy that applies to the request, the most constraining (fewest
requests remaining) first, so a client that only reads the first item still obeys the tightest.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta


@dataclass(frozen=True)
class Policy:
    """One quota: `quota` requests per `window` seconds, named on the wire by `name`."""

    name: str
    quota: int
    window: int


OVERALL = Policy("minute", 120, 60)
QUOTE = Policy("quote", 30, 60)
LAUNCH = Policy("launch", 10, 60)

_ROUTE_POLICIES: dict[tuple[str, str], Policy] = {
    ("POST", "/v1/clusters/quote"): QUOTE,
    ("POST", "/v1/clusters"): LAUNCH,
}


def policies_for(method: str, path: str) -> tuple[Policy, ...]:
    """The overall per-key policy, plus the route's own one if it has one."""
    specific = _ROUTE_POLICIES.get((method, path))
    return (specific, OVERALL) if specific else (OVERALL,)


@dataclass
class _Window:
    started: datetime
    used: int = 0


@dataclass(frozen=True)
class PolicyState:
    """Where one policy stands after a request: requests left and seconds until it resets."""

    policy: Policy
    remaining: int
    reset_seconds: int


@dataclass(frozen=True)
class Decision:
    """The limiter's answer for one request."""

    states: tuple[PolicyState, ...]
    exceeded: PolicyState | None = None

    @property
    def retry_after(self) -> int | None:
        return None if self.exceeded is None else self.exceeded.reset_seconds

    def headers(self) -> dict[str, str]:
        return {
            "RateLimit-Policy": ", ".join(
                f'"{s.policy.name}";q={s.policy.quota};w={s.policy.window}' for s in self.states
            ),
            "RateLimit": ", ".join(
                f'"{s.policy.name}";r={s.remaining};t={s.reset_seconds}' for s in self.states
            ),
        }


@dataclass
class RateLimiter:
    """Counts requests per (api key, policy). With `enforce` off it counts and reports only.

    Counting without enforcing keeps the headers truthful about usage while letting fast tests
    send hundreds of requests inside one frozen virtual minute. Then a window that fills up
    starts over instead of reading as exhausted (`r=0`): a client obeying the headers (the bot
    pauses on `r=0`) must not wait for a quota nobody enforces.
    """

    enforce: bool
    _windows: dict[tuple[str, str], _Window] = field(default_factory=dict)

    def hit(self, key: str, policies: Sequence[Policy], now: datetime) -> Decision:
        windows = [self._window(key, policy, now) for policy in policies]
        over = [
            (policy, window) for policy, window in zip(policies, windows, strict=True)
            if window.used >= policy.quota
        ]
        if self.enforce and over:
            # A refused request does not consume quota: the client only waits out the window.
            states = self._states(policies, windows, now)
            worst = max(
                (s for s in states if s.remaining == 0), key=lambda s: s.reset_seconds
            )
            return Decision(states, exceeded=worst)
        for window in windows:
            window.used += 1
        return Decision(self._states(policies, windows, now))

    def reset(self) -> None:
        self._windows.clear()

    def _window(self, key: str, policy: Policy, now: datetime) -> _Window:
        window = self._windows.get((key, policy.name))
        full = window is not None and not self.enforce and window.used >= policy.quota - 1
        if window is None or full or now >= window.started + timedelta(seconds=policy.window):
            window = self._windows[(key, policy.name)] = _Window(started=now)
        return window

    @staticmethod
    def _states(
        policies: Sequence[Policy], windows: Sequence[_Window], now: datetime
    ) -> tuple[PolicyState, ...]:
        states = []
        for policy, window in zip(policies, windows, strict=True):
            ends = window.started + timedelta(seconds=policy.window)
            reset = max(1, math.ceil((ends - now).total_seconds()))
            states.append(PolicyState(policy, max(0, policy.quota - window.used), reset))
        # Stable sort: on a tie the route's own (smaller) policy stays ahead of the overall one.
        return tuple(sorted(states, key=lambda s: s.remaining))
