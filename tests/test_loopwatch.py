"""The slow-callback check itself (tests/loopwatch.py) can fail: a callback that computes for
longer than SLOW is caught, a quick one and a long *wait* are not; a call into the loop from
another thread is refused, and an unclosed aiohttp response is still named."""

from __future__ import annotations

import asyncio
import gc
import time
import warnings

import aiohttp
import pytest
from aiohttp import web

from tests.loopwatch import SLOW, watch


def _compute(seconds: float) -> None:
    until = time.thread_time() + seconds
    while time.thread_time() < until:
        pass


async def test_a_callback_computing_past_the_limit_is_caught():
    loop = asyncio.get_running_loop()
    with watch(loop) as slow:
        assert not loop.get_debug()  # asyncio's debug mode stays off (loopwatch.py: its cost)
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


async def test_a_call_from_another_thread_is_refused_as_debug_mode_would():
    loop = asyncio.get_running_loop()
    with watch(loop):
        waited = loop.create_future()
        waited.add_done_callback(lambda _: None)  # resolving it schedules this: call_soon
        for call in (lambda: loop.call_soon(lambda: None),
                     lambda: loop.call_later(1, lambda: None),
                     lambda: loop.call_at(loop.time() + 1, lambda: None),
                     lambda: waited.set_result(1)):
            with pytest.raises(RuntimeError, match="thread"):
                await asyncio.to_thread(call)
        # … from the loop's own thread, and through call_soon_threadsafe, all is well
        done = loop.create_future()
        await asyncio.to_thread(loop.call_soon_threadsafe, done.set_result, 1)
        assert await done == 1
        loop.call_later(0, lambda: None).cancel()
    assert "call_soon" not in vars(loop) and "get_debug" not in vars(loop)  # the class's again
    await asyncio.to_thread(loop.call_soon, lambda: None)  # unwatched: no check (asyncio's own)


async def test_an_unclosed_aiohttp_response_is_still_named():
    """aiohttp names a response nobody closed only when the loop says it is debugging: asked
    from there, the watched loop says so (and nowhere else: no creation stacks)."""
    finish = asyncio.Event()

    async def unread(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(b"a body that goes on")
        await finish.wait()
        return response

    app = web.Application()
    app.router.add_get("/", unread)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        loop = asyncio.get_running_loop()
        with watch(loop), warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            assert loop.create_future()._source_traceback is None
            async with aiohttp.ClientSession() as session:
                response = await session.get(f"http://127.0.0.1:{port}/")
                del response  # never read nor closed; the session's close lets go of it
            gc.collect()
        assert "Unclosed response" in " ".join(str(w.message) for w in seen)
    finally:
        finish.set()
        await runner.cleanup()
