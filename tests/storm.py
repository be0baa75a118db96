"""A storm: many clusters degraded at once under Slack's rate limits, in real processes (the bot,
the simulator; FakeSlack enforcing per-channel and per-method limits). Shared by the storm test
(tests/test_storm.py) and `make bench` (benchmarks/storm.py).

`seed` records `n` running clusters — adopted ones, each with its card in the approvals channel
(where a new request's approval card must also go) — and one of them with an enforced 1-hour
envelope; `to_the_envelope` moves the clocks to just past its terminate's deadline (an hour
minus the margin after it was ready), before AI Reserve would charge its second hour. `strike`
degrades them all at once (one node each, as a region outage does). The readers below tell apart, in
FakeSlack's call log, the storm's notices, the approval card and the cluster messages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bot.domain.envelope import margin_for
from bot.domain.models import MessageRef
from bot.reserve.schemas import Cluster
from bot.services.observing import observe, record_from_wire
from bot.slack.ids import Action
from devslack.models import ApiCall
from tests.e2e.harness import launch_without_ssh
from tests.procs import ALICE, APPROVALS, GENERAL, BotProcess, World, wait_for

DIGEST = re.compile(r"\d+ clusters degraded in ")

POLL = timedelta(seconds=1)  # the bots' POLL_INTERVAL_SECONDS in tests/procs/worlds.py


@dataclass
class Storm:
    tops: dict[str, str]  # cluster id → its card's ts (in APPROVALS)
    envelope: str  # the cluster whose enforced envelope ends mid-storm
    due_at: datetime  # its terminate's deadline

    @property
    def clusters(self) -> list[str]:
        return list(self.tops)


async def seed(w: World, n: int, *, poll: timedelta = POLL) -> Storm:
    await w.sim.admin("clusters/seed", {"count": n})
    await w.advance(120)  # the fast profile boots a node in seconds
    wires = [Cluster.model_validate(c) for c in await w.sim.clusters()]
    now = max(c.created_at for c in wires)
    envelope = wires[0].id
    assert wires[0].ready_at is not None
    due_at = wires[0].ready_at + timedelta(hours=1) - margin_for(poll)
    tops: dict[str, str] = {}
    async with w.database() as db:
        await db.migrate()
        async with db.transaction() as repos:
            for wire in wires:
                extra: dict[str, Any] = {"observed": observe(wire), "connection_sent_at": now}
                if wire.id == envelope:
                    extra |= {"lifetime_hours": 1, "auto_terminate": True}
                await repos.clusters.add(record_from_wire(
                    wire, owner_id=ALICE, channel_id=GENERAL, request_id=None,
                    accelerator_name="NVIDIA H100 SXM 80GB", now=now).model_copy(update=extra))
                card = w.slack.post(channel=APPROVALS, text=f"Cluster {wire.id} (running)",
                                    blocks=[], via="chat.postMessage")
                await repos.messages.put("progress", f"cluster:{wire.id}",
                                         MessageRef(channel_id=APPROVALS, ts=card.ts), now=now)
                tops[wire.id] = card.ts
    return Storm(tops=tops, envelope=envelope, due_at=due_at)


async def to_the_envelope(w: World, storm: Storm) -> None:
    """Time passes (virtual) to a few seconds past the envelope's deadline."""
    now = datetime.fromisoformat((await w.sim.admin("clock", method="GET"))["now"])
    await w.advance((storm.due_at - now).total_seconds() + 5)


async def strike(w: World, storm: Storm) -> None:
    for cluster_id in storm.clusters:
        await w.sim.fail_node(cluster_id, 1)


def notices(w: World, storm: Storm) -> list[tuple[int, ApiCall]]:
    """The storm's notices posted (index in the call log, call): replies under its cards."""
    threads = set(storm.tops.values())
    return [(i, c) for i, c in enumerate(w.slack.calls)
            if c.method == "chat.postMessage" and c.ok and c.args.get("thread_ts") in threads]


def top_posts(w: World, since: int = 0) -> list[tuple[int, ApiCall]]:
    """Top-level posts in the approvals channel from call `since` on."""
    return [(i, c) for i, c in enumerate(w.slack.calls) if i >= since
            and c.method == "chat.postMessage" and c.ok and c.args.get("channel") == APPROVALS
            and not c.args.get("thread_ts")]


def digests(w: World) -> list[tuple[int, ApiCall]]:
    """The storm's digests (bot/slack/digests.py): top-level posts, in any channel, saying how
    many clusters are degraded."""
    return [(i, c) for i, c in enumerate(w.slack.calls) if c.method == "chat.postMessage"
            and c.ok and not c.args.get("thread_ts") and DIGEST.search(said(c))]


def cards(w: World, since: int) -> list[tuple[int, ApiCall]]:
    """Approval cards posted from call `since` on: the approvals channel's other top posts."""
    return [(i, c) for i, c in top_posts(w, since) if not DIGEST.search(said(c))]


def shows(w: World, storm: Storm, states: dict[str, str]) -> list[str]:
    """Clusters whose card doesn't show the state AI Reserve reports (`states`: id → status)."""
    wrong = []
    for cluster_id, ts in storm.tops.items():
        card = w.slack.message(APPROVALS, ts)
        if states[cluster_id] not in w.text_of(card).lower():
            wrong.append(cluster_id)
    return wrong


def said(call: ApiCall) -> str:
    return f"{call.args.get('text', '')} {call.args.get('blocks', '')}"


async def ask_for_a_launch(w: World, bot: BotProcess, *, user: str = ALICE) -> datetime:
    """Quote, Request launch, submit (`World.request_launch`, tests/procs/worlds.py, without its
    wait for the card: the storm's broadcast replies are in the approvals channel too). Returns
    when Submit was pressed, on FakeSlack's clock (its calls' `at`): what the card's delay counts
    from."""
    def quotes() -> list[Any]:
        return [m for m in w.slack.ephemerals(user) if Action.QUOTE_REQUEST_LAUNCH in w.text_of(m)]

    before = len(quotes())
    await bot.requests.slash(text="quote h100x8 nodes=2", user_id=user, channel_id=GENERAL)
    quote = await wait_for(lambda: quotes()[before:], what="the quote")
    views = len([c for c in w.slack.calls if c.method == "views.open"])
    await bot.requests.click(quote[-1], Action.QUOTE_REQUEST_LAUNCH, user_id=user)
    await wait_for(lambda: len([c for c in w.slack.calls if c.method == "views.open"]) > views,
                   what="the request modal")
    modal = w.slack.last_view(user)
    assert modal is not None
    pressed = w.slack.clock.now()
    reply = await bot.requests.submit_view(modal, user_id=user, values=launch_without_ssh())
    assert reply.status == 200 and not reply.body, reply.body
    return pressed
