"""Whose turn it is at a SQLite database, within one process: by lane, then first come.

SQLite takes one writer at a time and every transaction here may write (BEGIN IMMEDIATE,
storage/db.py), so a process's transactions take turns. First come, first served let a storm's
delivery — sixteen notices side by side, each claiming, posting and marking delivered — stand
between a person's Submit and its approval card several transactions deep, on each of the
card's own transactions: seconds on a busy machine (issue 32). Here the waiting transaction of
the lowest lane (bot/domain/lanes.py: a person's answer first, the sweeps' duties and money
next, the storm's telling, reminders last) goes next, the oldest first within a lane: a
transaction waits for the one in progress and those of lower lanes, not for a storm's — save the
few older ones that PASSED_AT_MOST turns already went past, which go next whatever their lane
(so no lane waits for ever behind a busier one).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

# Lanes say who goes first, never who goes at all: a waiting transaction goes next (the oldest
# such first) once this many turns went to transactions queued after it. Without it a stream of
# people's answers — a `/cluster list` backlog, each answer's next one queued before it is done
# — held the sweeps for minutes: no degraded notice, no envelope's terminate (issue 28).
PASSED_AT_MOST = 8


@dataclass(eq=False)
class _Waiting:
    lane: int
    handed: asyncio.Future[None]
    passed: int = 0  # turns handed to transactions queued after this one


class Turns:
    def __init__(self) -> None:
        self._busy = False
        self._waiting: list[_Waiting] = []  # first come first

    @asynccontextmanager
    async def turn(self, lane: int) -> AsyncIterator[None]:
        if self._busy:
            waiting = _Waiting(lane, asyncio.get_running_loop().create_future())
            self._waiting.append(waiting)
            try:
                await waiting.handed
            except BaseException:
                if waiting.handed.done() and not waiting.handed.cancelled():
                    self._next()  # handed the turn as it was cancelled: the next one's
                elif waiting in self._waiting:  # cancelled waiting
                    self._waiting.remove(waiting)
                raise
        self._busy = True
        try:
            yield
        finally:
            self._next()

    def _next(self) -> None:
        """Hand the turn (stays busy) to the oldest waiting if PASSED_AT_MOST went past it,
        else to the first of the lowest lane; or free it."""
        self._waiting = [w for w in self._waiting if not w.handed.done()]
        if not self._waiting:
            self._busy = False
            return
        oldest = self._waiting[0]
        chosen = oldest if oldest.passed >= PASSED_AT_MOST else \
            min(self._waiting, key=lambda w: w.lane)  # the first of the lowest lane
        at = self._waiting.index(chosen)
        for passed in self._waiting[:at]:
            passed.passed += 1
        del self._waiting[at]
        chosen.handed.set_result(None)
