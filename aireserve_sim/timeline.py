"""Simulated time: a queue of scheduled happenings, run lazily in chronological order.

The engine never runs a background task. Every public call first asks the timeline to
`run_until(clock.now())`; each happening then runs with `timeline.now` set to its own instant,
so what it records (events, log lines, ledger entries) carries the exact simulated time even
when the clock jumped hours in one step. A happening due exactly at `until` runs too: a call
made at an instant sees everything that happened at that instant.

Happenings at one instant run in `priority` order, then in the order they were scheduled:
state changes (boots, grace expiry, health passes, recovery steps, terminations) first, then
cluster accruals, then volume hours — so money is always judged on the state of that instant,
and a volume the cluster has just paid for is never billed on its own for the same hour.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

Action = Callable[[], None]

PRIORITY_STATE = 0
PRIORITY_CLUSTER_ACCRUAL = 1
PRIORITY_VOLUME_HOUR = 2


@dataclass(order=True)
class _Entry:
    when: datetime
    priority: int
    seq: int
    action: Action = field(compare=False)


class Timeline:
    """A deterministic discrete-event queue; `now` only moves forward."""

    def __init__(self, start: datetime) -> None:
        self.now = start
        self._queue: list[_Entry] = []
        self._seq = 0

    def at(self, when: datetime, action: Action, *, priority: int = PRIORITY_STATE) -> None:
        """Run `action` at `when` (never earlier than now: the past cannot be scheduled)."""
        self._seq += 1
        heapq.heappush(self._queue, _Entry(max(when, self.now), priority, self._seq, action))

    def run_until(self, until: datetime) -> None:
        """Run every happening due by `until`, oldest first, then stand at `until`."""
        while self._queue and self._queue[0].when <= until:
            head = heapq.heappop(self._queue)
            self.now = max(self.now, head.when)
            head.action()
        # A real clock can step backwards (NTP); simulated time never does.
        self.now = max(self.now, until)

    def pending(self) -> int:
        return len(self._queue)
