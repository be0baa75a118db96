"""The slow-callback check: nothing may hold the event loop for more than SLOW seconds.

`watch(loop)` records every callback (a task's step included) that spent SLOW or more of the
loop thread's CPU time, and meanwhile refuses a call into the loop from another thread, as
asyncio's debug mode does. It does not switch debug mode on: see `_DEBUG_FOR` below for why and
for what of it is kept.

CPU, not wall time: on a machine shared with other processes a callback may be descheduled
half-way, and that is not the code's fault; a callback that computes for SLOW is.

A garbage collection is CPU spent in whichever callback triggers it, and its cost grows with
the whole process's heap — here pytest's, FakeSlack's and the simulator's, none of which the
bot's process holds. So the collector's time is left out of a callback's CPU (and named in the
report); the benchmarks measure the bot process's own GC pauses. The heap
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
from typing import Any

import aiohttp

# 100 ms of CPU in one step. Production's steps are cheaper than the tests': here pytest's capture
# of each log record and the watch's own bookkeeping run inside them too, and a shared 2-core CI
# box inflates CPU time under contention (a 54 ms step was seen once with two suites running side
# by side; CI's machine measured a 90 ms step of a test's own at 101 ms). A step that computes for
# 100 ms even so is a real stall.
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


# asyncio's debug mode is NOT switched on: it cost ~26 % of an e2e test's CPU (measured A/B on
# test_flow, test_approvals and test_watching: 34 s -> 25 s) for checks this watch makes itself
# or does not need — its slow-callback log line (the report here names the slow step with where
# it stands), an inspect of every callback handed to call_soon, a clock read around every step
# and every poll. The two parts worth their price are kept, cheaply:
# - the thread check: a call_soon / call_at (call_later goes through call_at) from a thread that
#   is not the loop's raises, as debug mode's does — the bug it catches is a future resolved or a
#   callback scheduled from aiosqlite's or a to_thread worker's thread;
# - aiohttp's "Unclosed response" warning, which aiohttp gives only when the loop says it is
#   debugging: asked from ClientResponse.__del__, the watched loop says so.
_DEBUG_FOR = frozenset({aiohttp.ClientResponse.__del__.__code__})


def _debugging_only_for_aiohttp(loop: asyncio.AbstractEventLoop) -> Callable[[], bool]:
    real = loop.get_debug

    def get_debug() -> bool:
        return real() or sys._getframe(1).f_code in _DEBUG_FOR

    return get_debug


def _on_the_loops_thread(method: Callable[..., Any]) -> Callable[..., Any]:
    owner = threading.get_ident()

    def checked(*args: Any, **kwargs: Any) -> Any:
        if threading.get_ident() != owner:
            raise RuntimeError("Non-thread-safe operation invoked on an event loop other than "
                               "the current one (call_soon_threadsafe is the one for threads)")
        return method(*args, **kwargs)

    return checked


_PATCHED = ("get_debug", "call_soon", "call_at")


@contextmanager
def watch(loop: asyncio.AbstractEventLoop) -> Iterator[Slow]:
    """Record `loop`'s slow callbacks inside the block; meanwhile calls into the loop from
    another thread raise (`watch` must be entered on the loop's own thread)."""
    assert not any(name in vars(loop) for name in _PATCHED), "one watch per loop at a time"
    slow = Slow(loop)
    loop.get_debug = _debugging_only_for_aiohttp(loop)  # type: ignore[method-assign]
    loop.call_soon = _on_the_loops_thread(loop.call_soon)  # type: ignore[method-assign]
    loop.call_at = _on_the_loops_thread(loop.call_at)  # type: ignore[method-assign]
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
        for name in _PATCHED:
            delattr(loop, name)  # the class's again
