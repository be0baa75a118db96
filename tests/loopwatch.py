"""The slow-callback check: nothing may hold the event loop for more than SLOW seconds.

`watch(loop)` switches the loop to asyncio's debug mode with `slow_callback_duration = SLOW`
(asyncio then logs "Executing <callback> took 0.123 seconds" for each slow one, and refuses a
call from another thread) and records every callback that spent SLOW or more of the loop
thread's CPU time. It leaves out one part of debug mode, the stack captured at the creation of
every future, task and handle: the costliest part, and the report names what ran without it.
CPU, not wall time: on a machine shared with other processes a callback may be descheduled
half-way, and that is not the code's fault; a callback that computes for SLOW is.

A garbage collection is CPU spent in whichever callback triggers it, and its cost grows with
the whole process's heap — here pytest, FakeSlack, the simulator and debug mode's tracebacks,
none of which the bot's process holds. So the collector's time is left out of a callback's
CPU (and named in the report); the benchmarks measure the bot process's own GC pauses. The heap
present when the watch starts is frozen (`gc.freeze()`) meanwhile, as the bot freezes what it
built at start-up.

tests/e2e/conftest.py applies it to every e2e test (a whole bot, FakeSlack and the simulator on
one loop); tests/e2e/test_scale.py drives a 1,000-cluster sweep and `/cluster list` under it.
"""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import aiohttp
import aiohttp.connector

# 100 ms of CPU in one step. Production's steps are cheaper than the tests': here asyncio's debug
# mode and pytest's capture of every DEBUG log record (SQL included) run inside them too, and a
# shared 2-core CI box inflates CPU time under contention (a 54 ms step was seen once with two
# suites running side by side). A step that computes for 100 ms even so is a real stall.
SLOW = 0.1


@dataclass
class Slow:
    """The callbacks that were slow while watched: (CPU seconds, what ran)."""

    loop: asyncio.AbstractEventLoop
    found: list[tuple[float, str]] = field(default_factory=list)

    def report(self) -> str:
        return "; ".join(f"{cpu * 1000:.0f} ms CPU in {what}" for cpu, what in self.found)


_gc = {"started": 0.0, "total": 0.0}  # CPU seconds spent collecting garbage, all told


def _on_gc(phase: str, _info: dict[str, int]) -> None:
    if threading.current_thread() is not threading.main_thread():
        return  # a worker thread's collection holds no event loop (the loop runs on main)
    if phase == "start":
        _gc["started"] = time.thread_time()
    else:
        _gc["total"] += time.thread_time() - _gc["started"]


_watching: list[Slow] = []
_starting = [0]  # > 0 while a bot starts up: not serving yet, so nothing to stall
_original_run = asyncio.Handle._run


def _timed_run(handle: asyncio.Handle) -> None:
    if not _watching:
        _original_run(handle)
        return
    started, collecting = time.thread_time(), _gc["total"]
    try:
        _original_run(handle)
    finally:
        collected = _gc["total"] - collecting
        spent = time.thread_time() - started - collected
        if spent >= SLOW and not _starting[0]:
            for watch in _watching:
                if handle._loop is watch.loop:  # type: ignore[attr-defined]
                    watch.found.append((spent, f"{_describe(handle)} (and {collected * 1000:.0f}"
                                               " ms collecting garbage)"))


def _describe(handle: asyncio.Handle) -> str:
    """What ran: for a task's step, the task's coroutine and where it stopped next."""
    for ref in gc.get_referents(handle._callback):  # type: ignore[attr-defined]
        if isinstance(ref, asyncio.Task):
            coro = ref.get_coro()
            frames = []
            inner: object = coro
            while (frame := getattr(inner, "cr_frame", None)) is not None:
                frames.append(f"{frame.f_code.co_name}:{frame.f_lineno}")
                inner = getattr(inner, "cr_await", None)
            return f"task {getattr(coro, '__qualname__', coro)} (now at {' > '.join(frames)})"
    return repr(handle)[:300]


@contextmanager
def starting_up() -> Iterator[None]:
    """A bot starting (migrations, wiring): its callbacks are not held to SLOW — nothing is
    served yet, so there is nothing to keep waiting."""
    _starting[0] += 1
    try:
        yield
    finally:
        _starting[0] -= 1


# Where debug mode captures the stack that created each future, task and handle: the whole
# stack, pytest's included, with its source lines read — for every `await` on a future. That
# was ~40 % of an e2e test's CPU and tells nothing the report doesn't (a slow task is named with
# where it stands). Asked from these, the watched loop says "not debugging"; everything else
# (its thread checks, the slow-callback log line, aiohttp's unclosed-response warning …) still
# sees debug mode.
_NO_CREATION_STACK = frozenset({
    asyncio.BaseEventLoop.create_future.__code__,  # the C Future asks its loop on creation
    asyncio.BaseEventLoop.create_task.__code__,  # … and so does the C Task
    asyncio.Handle.__init__.__code__,  # TimerHandle's too
    asyncio.tasks._GatheringFuture.__init__.__code__,  # type: ignore[attr-defined]  # gather()
    # aiohttp keeps the creating stack of each session, connector, connection, request and
    # response in debug mode (~4 % of an e2e test's CPU). Its "Unclosed response" warning, asked
    # from ClientResponse.__del__, still sees debug mode.
    aiohttp.ClientSession.__init__.__code__,
    aiohttp.BaseConnector.__init__.__code__,
    aiohttp.connector.Connection.__init__.__code__,
    aiohttp.ClientRequest.__init__.__code__,
    aiohttp.ClientResponse.__init__.__code__,
})


def _debug_but_no_creation_stacks(loop: asyncio.AbstractEventLoop) -> Callable[[], bool]:
    real = loop.get_debug

    def get_debug() -> bool:
        return real() and sys._getframe(1).f_code not in _NO_CREATION_STACK

    return get_debug


@contextmanager
def watch(loop: asyncio.AbstractEventLoop) -> Iterator[Slow]:
    """Record `loop`'s slow callbacks inside the block (debug mode on meanwhile)."""
    slow = Slow(loop)
    debug, duration = loop.get_debug(), loop.slow_callback_duration
    loop.set_debug(True)
    # set_debug on a running loop turns on coroutine origin tracking at its next step (a
    # callback it queues): every coroutine created then keeps the ten frames that created it,
    # for the text of a "never awaited" warning alone — ~15 % of an e2e test's CPU. Off again
    # right after (queued behind it); the warning is still raised, naming the coroutine.
    loop.call_soon_threadsafe(sys.set_coroutine_origin_tracking_depth, 0)
    loop.get_debug = _debug_but_no_creation_stacks(loop)  # type: ignore[method-assign]
    loop.slow_callback_duration = SLOW
    asyncio.Handle._run = _timed_run  # type: ignore[method-assign]
    _watching.append(slow)
    # What exists now is frozen: collections while watched don't walk it (a full collection of
    # a worker's heap, pytest's and the earlier tests' included, took ~0.3 s per test when
    # collected first; garbage frozen with it is collected after the unfreeze).
    gc.freeze()
    if _on_gc not in gc.callbacks:
        gc.callbacks.append(_on_gc)
    try:
        yield slow
    finally:
        gc.unfreeze()
        _watching.remove(slow)
        if not _watching:
            asyncio.Handle._run = _original_run  # type: ignore[method-assign]
        del loop.get_debug  # the class's again
        loop.set_debug(debug)
        loop.slow_callback_duration = duration
