"""The slow-callback check itself (tests/loopwatch.py) can fail: a callback that computes for
longer than SLOW is caught, a quick one and a long *wait* are not."""

from __future__ import annotations

import asyncio
import sys
import time

import pytest

from tests.loopwatch import SLOW, watch


def _compute(seconds: float) -> None:
    until = time.thread_time() + seconds
    while time.thread_time() < until:
        pass


async def test_a_callback_computing_past_the_limit_is_caught():
    loop = asyncio.get_running_loop()
    with watch(loop) as slow:
        assert loop.get_debug() and loop.slow_callback_duration == SLOW
        loop.call_soon(_compute, SLOW * 1.6)
        await asyncio.sleep(0)  # one loop iteration: the callback runs
    assert len(slow.found) == 1 and slow.found[0][0] >= SLOW
    assert "_compute" in slow.report()
    assert not loop.get_debug()


async def test_quick_callbacks_and_long_waits_pass():
    with watch(asyncio.get_running_loop()) as slow:
        for _ in range(20):
            _compute(SLOW / 10)
            await asyncio.sleep(0)
        # A long wait is not blocking: the loop waits while another thread computes.
        await asyncio.to_thread(_compute, SLOW * 1.6)
    assert slow.found == []


async def test_debug_checks_stay_on_without_a_creation_stack_per_future():
    loop = asyncio.get_running_loop()
    with watch(loop):
        future = loop.create_future()
        task = asyncio.create_task(asyncio.sleep(0))
        handle = loop.call_soon(lambda: None)
        # The costly part of debug mode is off: no creation stack for each of these …
        assert future._source_traceback is None and task._source_traceback is None
        assert handle._source_traceback is None  # type: ignore[attr-defined]
        # … nor the creating frames of each coroutine (debug mode turns that on a step later).
        await asyncio.sleep(0)
        made = asyncio.sleep(0)
        assert made.cr_origin is None and sys.get_coroutine_origin_tracking_depth() == 0
        await made
        # … its checks are on: a call from another thread is refused.
        with pytest.raises(RuntimeError, match="thread"):
            await asyncio.to_thread(loop.call_soon, lambda: None)
        await task
        future.cancel()
    assert loop.create_future()._source_traceback is None  # debug mode is off again
