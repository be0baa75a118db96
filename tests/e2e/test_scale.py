"""A thousand clusters without a stall: a whole bot sweeps 1,000 live clusters and answers
`/cluster list` under the slow-callback check (tests/loopwatch.py, applied by conftest.py).

Quiet sweeps write nothing and post nothing, list in pages of 200 (5 list calls, no GET), and a
node failing in one of the thousand is announced on the next sweep; `/cluster list` is a page
of 25 lines with the totals of all 1,000."""

from __future__ import annotations

import asyncio
import gc
import json
from datetime import datetime

import sqlalchemy as sa

from bot.jobs import sweeps
from bot.reserve.schemas import Cluster, ShapeRequest
from bot.services.observing import observe, record_from_wire
from storage.tables.clusters import CLUSTERS
from tests.e2e.harness import ALICE, GENERAL, Harness, bot

N = 1000
BOOT_SECONDS = 120


async def _thousand_tracked(h: Harness) -> list[Cluster]:
    """N running clusters at the simulator, each already tracked (and observed) by the bot."""
    shape = ShapeRequest(accelerator="h100-sxm-80gb", gpus_per_node=8, nodes=2)
    # The simulator shares the test's event loop: its bulk work goes to a thread, like ours.
    await asyncio.to_thread(h.sim.engine.seed_clusters, count=N, shape=shape)
    wires = await _advance(h, BOOT_SECONDS)
    now = h.clock.now()

    def records() -> list:
        return [record_from_wire(w, owner_id=ALICE, channel_id=GENERAL, request_id=None,
                                 accelerator_name="H100 SXM 80GB", now=now).model_copy(
                    update={"observed": observe(w), "connection_sent_at": now})
                for w in wires]

    for record in await asyncio.to_thread(records):
        async with h.rt.db.transaction() as repos:
            await repos.clusters.add(record)
    # The simulator's thousand clusters live in this process too (the bot's don't): out of
    # the garbage collector's way, like the bot's own start-up heap.
    gc.collect()
    gc.freeze()
    return wires


async def _advance(h: Harness, seconds: float) -> list[Cluster]:
    """Time passes; the simulator settles it on a thread (its thousand timelines are not the
    bot's work), and lists its clusters."""
    h.clock.advance(seconds)
    return await asyncio.to_thread(h.sim.engine.list_clusters)


async def _written(h: Harness, since: datetime) -> set[str]:
    """The clusters whose rows were written after `since`."""
    async with h.rt.db.transaction() as repos:
        found = await repos.session.execute(
            sa.select(CLUSTERS.c.id).where(CLUSTERS.c.updated_at > since))
        return set(found.scalars())


async def test_a_thousand_clusters_sweep_and_list_without_a_stall(tmp_path):
    async with bot(tmp_path) as h:
        wires = await _thousand_tracked(h)
        assert {w.status.value for w in wires} == {"running"}
        posted, stored = len(h.slack.calls), h.clock.now()
        listed: list[str] = []
        real = h.rt.provider.cluster_pages
        gets: list[str] = []
        real_get = h.rt.provider.get_cluster

        def counted(*args, **kwargs):
            listed.append(kwargs.get("page_size"))
            return real(*args, **kwargs)

        async def counted_get(cluster_id: str):
            gets.append(cluster_id)
            return await real_get(cluster_id)

        h.rt.provider.cluster_pages = counted  # type: ignore[method-assign]
        h.rt.provider.get_cluster = counted_get  # type: ignore[method-assign]
        for _ in range(2):
            await _advance(h, 5)
            await sweeps.watch_clusters(h.rt.services)
        assert listed == [200, 200] and gets == []
        assert await _written(h, stored) == set()  # quiet: not one row written
        assert len(h.slack.calls) == posted  # … and nothing said

        failing = wires[N // 2].id
        await h.fail_node(failing)
        await _advance(h, 5)
        await sweeps.watch_clusters(h.rt.services)
        await sweeps.deliver_outbox(h.rt.services)  # the watch sweep stores, this one tells
        await h.rt.settle()
        said = [c for c in h.slack.calls[posted:] if c.method == "chat.postMessage"]
        assert said and all(failing in json.dumps(c.args) for c in said)
        assert await _written(h, stored) == {failing}

        await h.slash("list")
        first = h.last_ephemeral(ALICE, containing="Page 1 of 40")
        assert f"Live clusters ({N})" in h.text_of(first)
        assert "`/cluster list 2` for the next" in h.text_of(first)
        assert len(first.blocks) <= 50 and len(json.dumps(first.blocks)) < 13_000
        oldest = sorted(wires, key=lambda w: (w.created_at, w.id))
        assert oldest[0].id in h.text_of(first) and oldest[25].id not in h.text_of(first)
        await h.slash("list 99")  # past the end: the last page
        last = h.last_ephemeral(ALICE, containing="Page 40 of 40")
        assert oldest[-1].id in h.text_of(last) and "for the next" not in h.text_of(last)
