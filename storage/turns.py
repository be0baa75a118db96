"""Whose turn it is at a SQLite database, within one process: by lane, then first come.

SQLite takes one writer at a time and every transaction here may write (BEGIN IMMEDIATE,
storage/db.py), so a process's transactions take turns. First come, first served let a storm's
delivery — sixteen notices side by side, each claiming, posting and marking delivered — stand
between a person's Submit and its approval card several transactions deep, on each of the
card's own transactions: seconds on a busy machine (issue 32). Here the waiting transaction of
the lowest lane (bot/domain/lanes.py: a person's answer first, the sweeps' duties and money
next, the storm's telling, reminders last) goes next, the oldest first within a lane: a
transaction waits for the one in progress and those of lower lanes, never for a storm's.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class Turns:
    def __init__(self) -> None:
        self._busy = False
        self._waiting: list[tuple[int, int, asyncio.Future[None]]] = []  # a heap
        self._seq = itertools.count()

    @asynccontextmanager
    async def turn(self, lane: int) -> AsyncIterator[None]:
        if self._busy:
            handed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            entry = (lane, next(self._seq), handed)
            heapq.heappush(self._waiting, entry)
            try:
                await handed
            except BaseException:
                if handed.done() and not handed.cancelled():
                    self._next()  # handed the turn as it was cancelled: the next one's
                elif entry in self._waiting:  # cancelled waiting (_next may have dropped it)
                    self._waiting.remove(entry)
                    heapq.heapify(self._waiting)
                raise
        self._busy = True
        try:
            yield
        finally:
            self._next()

    def _next(self) -> None:
        """Hand the turn to the first waiting (stays busy), or free it."""
        while self._waiting:
            _, _, handed = heapq.heappop(self._waiting)
            if not handed.done():
                handed.set_result(None)
                return
        self._busy = False
