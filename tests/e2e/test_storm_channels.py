"""A storm stays in its channel (issue 28, item 2). Slack's post limit is per channel, and so
is the bot's delivery: a notice in another channel — stored before the storm's or while its
notices are still going out — never waits behind the storm's queue; inside the storm's channel
the digest speaks first and the per-cluster thread lines come last."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from bot.domain.lanes import Lane
from bot.domain.models import MessageRef
from bot.jobs import sweeps
from bot.services.observing import observe, record_from_wire
from bot.slack.pacing import Pacer, parse_limits
from tests.e2e.harness import ALICE, APPROVALS, GENERAL, Harness, bot
from tests.procs import wait_for

STORM = 16
LIMITS = "chat.postMessage=1/s/channel"  # Slack's: 16 s of storm, on the test's clock


def _paced(h: Harness, limits: str) -> None:
    """The bot paces Slack's `limits` by the test's clock: no call goes before the test moves
    it (`_until`), so what goes out while a storm drains is decided by the test, not by how
    busy the machine is."""
    h.rt.slack.pacer = Pacer(parse_limits(limits),  # type: ignore[attr-defined]
                             now=lambda: h.clock.now().timestamp(), look_every=0.01)
    h.rt.notifier.outbox.concurrency = 16  # as runtime.py sets it when paced


async def _until(h: Harness, done: Callable[[], object], *, what: str) -> None:
    """Time passes, a second at each look, until `done()`."""
    def moved() -> bool:
        if done():
            return True
        h.clock.advance(1)
        return False

    await wait_for(moved, within=60, what=what)


async def _seed(h: Harness, count: int, channel: str) -> dict[str, str]:
    """`count` running clusters of alice's, each with its card in `channel` → id: card ts."""
    ids = (await h.sim_admin("clusters/seed", {"count": count}))["data"]
    h.clock.advance(120)
    wires = [await h.rt.provider.get_cluster(i) for i in ids]
    tops: dict[str, str] = {}
    async with h.rt.db.transaction() as repos:
        for wire in wires:
            extra: dict[str, Any] = {"observed": observe(wire), "connection_sent_at": h.clock.now()}
            await repos.clusters.add(record_from_wire(
                wire, owner_id=ALICE, channel_id=channel, request_id=None,
                accelerator_name="NVIDIA H100 SXM 80GB", now=h.clock.now()).model_copy(
                    update=extra))
            card = h.slack.post(channel=channel, text=f"Cluster {wire.id} (running)", blocks=[],
                                via="chat.postMessage")
            await repos.messages.put("progress", f"cluster:{wire.id}",
                                     MessageRef(channel_id=channel, ts=card.ts), now=h.clock.now())
            tops[wire.id] = card.ts
    return tops


def _replies(h: Harness, channel: str, tops: dict[str, str]) -> list[int]:
    """Where in the call log the replies under `tops` (in `channel`) were posted."""
    threads = set(tops.values())
    return [i for i, c in enumerate(h.slack.calls)
            if c.method == "chat.postMessage" and c.ok and c.args.get("channel") == channel
            and c.args.get("thread_ts") in threads]


async def test_another_channels_notice_never_waits_behind_a_storm(tmp_path):
    async with bot(tmp_path) as h:
        storm = await _seed(h, STORM, APPROVALS)
        other = await _seed(h, 1, GENERAL)
        [elsewhere] = other
        _paced(h, LIMITS)

        for cluster_id in storm:
            await h.fail_node(cluster_id)
        h.clock.advance(1)
        await sweeps.watch_clusters(h.rt.services)  # the storm's notices, stored
        delivering = asyncio.create_task(sweeps.deliver_outbox(h.rt.services))
        await _until(h, lambda: len(_replies(h, APPROVALS, storm)) >= 2,
                     what="the storm going out")

        await h.fail_node(elsewhere)  # another channel, mid-storm
        h.clock.advance(1)
        await sweeps.watch_clusters(h.rt.services)
        # The clock stands still: the storm's channel can't post, the other one can.
        [told] = await wait_for(lambda: _replies(h, GENERAL, other), within=STORM,
                                what="the other channel's notice")
        await _until(h, delivering.done, what="the rest of the storm")
        await delivering
        storm_told = _replies(h, APPROVALS, storm)
        assert len(storm_told) == STORM
        # Told while the storm still had its notices to go (a second each); not after them all.
        assert len([i for i in storm_told if i > told]) >= STORM // 4, (told, storm_told)
        # The storm's digest spoke before its thread lines.
        [digest] = [i for i, c in enumerate(h.slack.calls) if c.method == "chat.postMessage"
                    and c.ok and c.args.get("channel") == APPROVALS
                    and not c.args.get("thread_ts") and "degraded in" in str(c.args.get("text"))]
        assert digest < min(storm_told)



EDITS = 12
EDIT_LIMITS = "chat.update=4/s"  # 3 s of edits, on the test's clock


async def test_a_notice_stored_while_the_outbox_drains_goes_out_meanwhile(tmp_path):
    """A first install (item 1): the found clusters' digest and edits drain from the outbox,
    paced, for a while; a tracked cluster's notice stored meanwhile goes out then, not at the
    next delivery pass after them."""
    async with bot(tmp_path) as h:
        cards = await _seed(h, EDITS, APPROVALS)
        other = await _seed(h, 1, GENERAL)
        [elsewhere] = other
        _paced(h, EDIT_LIMITS)
        async with h.rt.db.transaction() as repos:
            for cluster_id in cards:
                await repos.outbox.queue_refresh("cluster", cluster_id, lane=int(Lane.HEALTH),
                                                 now=h.clock.now())

        def edits() -> list[int]:
            return [i for i, c in enumerate(h.slack.calls) if c.method == "chat.update"]

        delivering = asyncio.create_task(sweeps.deliver_outbox(h.rt.services))
        await wait_for(edits, within=10, what="the edits going out")
        await h.fail_node(elsewhere)
        h.clock.advance(1)
        await sweeps.watch_clusters(h.rt.services)  # stored while the edits drain
        [told] = await wait_for(lambda: _replies(h, GENERAL, other), within=EDITS,
                                what="the notice, while the edits still go out")
        await _until(h, delivering.done, what="the rest of the edits")
        await delivering
        assert len(edits()) == EDITS
        assert told < max(edits()), (told, edits())
