"""Backoff that obeys, seen from outside: a bot process told `Retry-After: 120` on the list call
doesn't call it again on its next sweeps (1 s apart) until the 120 s have passed; and the sweep
lists at the largest page size the contract allows."""

from __future__ import annotations

import pytest

from bot.reserve.port import MAX_PAGE_SIZE
from tests.e2e.harness import bot
from tests.procs import wait_for, world

LIST = "GET /v1/clusters"


@pytest.mark.procs
async def test_retry_after_on_the_list_pauses_the_next_sweeps(tmp_path):
    async with world(tmp_path) as w:
        # A paused list is AI Reserve rate limiting: said once by its reachability, each sweep's
        # "is paused" only at DEBUG (issue 24 item 4), which is what counts the sweeps here.
        bot_process = await w.bot(env={"LOG_LEVEL": "DEBUG"})
        await w.sim.fault(LIST, status=429, retry_after_seconds=120)
        await w.sim.fault(LIST, status=500, count=1000)  # counts any list call that follows

        async def sentinel() -> int:
            return next(f["remaining"] for f in await w.sim.faults() if f["status"] == 500)

        await wait_for(lambda: bot_process.logs().count("GET /clusters is paused") >= 3,
                       what="three sweeps that kept off the paused list call")
        assert await sentinel() == 1000  # not one list call in those sweeps

        await w.advance(121)  # the bot's clock too: the pause has passed

        async def called_again() -> bool:
            return await sentinel() < 1000

        await wait_for(called_again, what="the list call once the pause passed")


async def test_the_sweep_lists_at_the_largest_page_size(tmp_path):
    async with bot(tmp_path) as h:
        await h.running_cluster()
        asked = []
        real = h.rt.provider.iter_clusters

        def spy(status=None, *, page_size=None):
            asked.append(page_size)
            return real(status, page_size=page_size)

        h.rt.provider.iter_clusters = spy
        await h.rt.services.reconciling.reconcile()
        assert asked == [MAX_PAGE_SIZE] == [200]
