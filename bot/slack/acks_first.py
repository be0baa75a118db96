"""Acks first, on the event loop itself: the work a request does after its ack takes its turns
behind everything else, a slice of at most WORK_PER_TURN seconds per turn of the loop.

Every ready callback takes its turn on the loop in the order it became ready. Under a burst of
`/cluster list`s (~1 ms of CPU to ack, ~10 ms of work after it) the 16 listeners working at
once (bot/slack/inflight.py `WorkSlots`) each had a step ready in every turn, and a request
still waiting for its ack — reading its body, its middleware, Bolt's poll for the ack, writing
the answer: several turns — waited behind all of them in each.

A listener's task is marked as working after its ack (`after_ack()`, called by `AckFirst` once
the answer has left) and everything it schedules from then on inherits the mark (the steps of
its task, the tasks it starts, the callbacks of what it awaits: asyncio schedules them all with
`call_soon(…, context=…)`). The sweeps are marked the same way (`behind_acks()`, which the
runtime hands to bot/jobs/scheduler.py: bot/jobs may not import bot/slack): nobody waits for a
sweep's steps to the millisecond (nor for the threads they start), and at the acks' priority a
sweep that met a burst took one step in every turn of it.

`AcksFirstLoop` holds those callbacks back in their own queue and runs them from one callback
of its own, a slice of up to WORK_PER_TURN seconds (at least one step), in a turn where nothing
else is ready — not even I/O: a turn that finds nothing ready lets the loop look at its sockets
once more before the slice, since a burst's next request is often already there, unread. While
other callbacks keep the loop busy the work waits, HOLD_AT_MOST seconds at most (by the loop's
clock): long enough for a burst of 200 requests to be acked first (before, the work took a slice
after every PASS_TURNS busy turns from the start). Past that bound it takes a slice after every
PASS_TURNS busy turns until the loop is idle again or the work has caught up. So a step of work
at the head of the queue waits at most HOLD_AT_MOST seconds, plus PASS_TURNS turns and the turn
in progress, whatever the load: a burst delays a sweep (and the degraded notice it finds) by
that bound, never starves it (tests/test_jobs.py).

A request waiting for its ack finds at most one slice ahead of it when it arrives, and in its
turns after that none for HOLD_AT_MOST seconds.
A loop that is not an `AcksFirstLoop` ignores the mark (the tests' loops, say): the same work
runs in the same order, only without the priority.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import time
from collections.abc import Callable
from typing import Any

# Seconds of work after acks per turn of the loop; at least one step runs whatever it costs.
WORK_PER_TURN = 0.002
# The longest the work waits (by the loop's clock) while other callbacks keep the loop busy.
HOLD_AT_MOST = 0.5
# Past HOLD_AT_MOST: busy turns the work lets go by before it takes a slice anyway.
PASS_TURNS = 4

_AFTER_ACK: contextvars.ContextVar[bool] = contextvars.ContextVar("after_ack", default=False)


def after_ack() -> None:
    """What the calling task does from now on is work after an ack (and so is every task it
    starts): it takes its turns behind everything else on an `AcksFirstLoop`."""
    _AFTER_ACK.set(True)


# What the sweeps call as they begin (through bot/app/runtime.py): the same mark.
behind_acks = after_ack


class AcksFirstLoop(asyncio.SelectorEventLoop):
    """The bot's event loop (`cluster-bot serve`): work after an ack takes at most
    `work_per_turn` seconds (by `clock`) of each turn of the loop, behind everything else,
    and waits at most `hold` seconds while everything else keeps the loop busy."""

    _ready: collections.deque[asyncio.Handle]  # BaseEventLoop's: what runs in this turn

    def __init__(self, selector: Any = None, *, work_per_turn: float = WORK_PER_TURN,
                 hold: float = HOLD_AT_MOST,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        super().__init__(selector)
        self._work: collections.deque[asyncio.Handle] = collections.deque()
        self._turn_due = False
        self._passed = 0  # busy turns the work let go by since its last slice
        self._held_since: float | None = None  # when the work last found the loop busy
        self._looked = False  # an idle turn let the loop look at its sockets once more
        self._work_per_turn = work_per_turn
        self._hold = hold
        self._clock = clock
        self.work_steps = 0  # steps of work after acks run so far, and in how many slices
        self.work_slices = 0

    def call_soon(self, callback: Callable[..., object], *args: Any,  # type: ignore[override]
                  context: contextvars.Context | None = None) -> asyncio.Handle:
        if context is None or not context.get(_AFTER_ACK, False):
            return super().call_soon(callback, *args, context=context)
        handle = asyncio.Handle(callback, args, self, context)
        self._work.append(handle)
        if not self._turn_due:  # one turn of work is always scheduled while work waits
            super().call_soon(self._work_turn)
            self._turn_due = True
        return handle

    def waiting_work(self) -> int:
        """Steps of work after acks ready to run, held back for their turn."""
        return len(self._work)

    def _work_turn(self) -> None:
        """This turn's slice of the work after acks — unless something else is ready (the
        work waits, up to `hold` seconds, then lets PASS_TURNS busy turns go by between its
        slices), or nothing is but the loop has not looked at its sockets since it last found
        something (it looks first). The next turn's is scheduled behind what is ready now, so
        it runs only after the loop has looked for I/O again."""
        if self._ready:
            self._looked = False
            now = self._clock()
            if self._held_since is None:
                self._held_since = now
            if now - self._held_since < self._hold or self._passed < PASS_TURNS:
                self._passed += 1
                super().call_soon(self._work_turn)
                return
        elif not self._looked:
            self._looked = True  # idle, as far as this turn knows: look at the sockets first
            super().call_soon(self._work_turn)
            return
        else:
            self._held_since = None  # the loop was idle: it has caught up with the rest
        self._passed = 0
        self._looked = False  # the next idle turn looks again: I/O may come during this slice
        self.work_slices += 1
        began = self._clock()
        while self._work:
            handle = self._work.popleft()
            if handle.cancelled():
                continue
            self.work_steps += 1
            handle._run()  # exceptions go to the loop's handler, as for any callback
            if self._clock() - began >= self._work_per_turn:
                break
        if self._work:
            super().call_soon(self._work_turn)
        else:
            self._turn_due = False
            self._held_since = None  # caught up
