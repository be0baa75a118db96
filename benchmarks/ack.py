"""Slack's 3-second rule: how fast the bot answers Slack's HTTP request, whatever AI Reserve does.

`/cluster quote h100x8 nodes=2` is sent in bursts of concurrent, signed requests, first with the
simulator answering normally, then with every quote held 2 s by an injected fault. The ack
(the HTTP answer's wall time, `Reply.elapsed`) must not follow the provider; the quote card,
posted afterwards through the response_url, does. The card's time is measured from the moment
its burst was sent. Then 20 approvers' clicks race on one approval card, with the launch call
answering normally and then held 2 s.

The garbage collector's pauses are recorded alongside: a full collection stops the event loop,
so every request in flight waits for it, and that shows in the tail of the acks.
"""

from __future__ import annotations

import asyncio
import copy
import json
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.report import Table, gc_pauses, ms, percentile
from bot.domain.models import RequestStatus
from bot.slack.ids import Action
from devslack.models import ACK_DEADLINE, ApiCall
from tests.e2e.harness import ALICE, BOB, CAROL, DAVE, Harness, bot

COMMANDS = 100
BURST = 20
QUOTE = "quote h100x8 nodes=2"
SLOW_SECONDS = 2.0
CLICKS = 20
USERS = (ALICE, BOB, CAROL, DAVE)


@dataclass
class Run:
    """Acks and card arrival times (seconds) of one scenario, and the GC pauses during it."""

    acks: list[float] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    cards: list[float] | None = None
    gc: list[tuple[int, float]] = field(default_factory=list)

    def row(self, name: str) -> list[str]:
        late = sum(1 for a in self.acks if a > ACK_DEADLINE)
        refused = sum(1 for s in self.statuses if s != 200)
        full = [s for generation, s in self.gc if generation == 2]
        return [name, str(len(self.acks)), ms(percentile(self.acks, 50)),
                ms(percentile(self.acks, 95)), ms(percentile(self.acks, 99)),
                ms(max(self.acks)), f"{late}/{refused}",
                ms(percentile(self.cards, 50)) if self.cards else "-",
                ms(percentile(self.cards, 99)) if self.cards else "-",
                f"{len(full)}/{ms(max(full, default=0.0))}"]


async def _quotes(h: Harness, *, commands: int, burst: int) -> Run:
    arrivals: list[float] = []

    def on_call(call: ApiCall) -> None:
        if call.method == "response_url" and Action.QUOTE_REQUEST_LAUNCH in json.dumps(
                call.args.get("blocks")):
            arrivals.append(time.perf_counter())

    run, cards = Run(), []
    unsubscribe = h.slack.subscribe(on_call)
    try:
        with gc_pauses() as pauses:
            for start in range(0, commands, burst):
                arrivals.clear()
                sent = time.perf_counter()
                replies = await asyncio.gather(*(
                    h.requests.slash(text=QUOTE, user_id=USERS[i % len(USERS)])
                    for i in range(min(burst, commands - start))))
                await h.rt.settle()  # every listener (so every respond()) has finished
                run.acks += [r.elapsed for r in replies]
                run.statuses += [r.status for r in replies]
                cards += [t - sent for t in arrivals]
    finally:
        unsubscribe()
    run.cards, run.gc = cards, pauses
    return run


async def _approvals(h: Harness, *, slow_launch: float | None) -> tuple[Run, int, bool]:
    """20 concurrent Approve clicks on one card: (acks, clusters launched, request launched?)."""
    card = copy.deepcopy(await h.request(quote_text=QUOTE))  # what every approver sees
    if slow_launch is not None:
        await h.sim_admin("faults", {"route": "POST /v1/clusters",
                                     "delaySeconds": slow_launch, "count": 1})
    before = len(h.sim.engine.list_clusters())
    with gc_pauses() as pauses:
        replies = await asyncio.gather(*(
            h.requests.click(card, Action.APPROVE, user_id=BOB if i % 2 else CAROL)
            for i in range(CLICKS)))
        await h.rt.settle()
    launched = len(h.sim.engine.list_clusters()) - before
    request = (await h.requests_in_db())[-1]
    run = Run([r.elapsed for r in replies], [r.status for r in replies], gc=pauses)
    return run, launched, request.status is RequestStatus.LAUNCHED


async def run() -> list[Table]:
    with tempfile.TemporaryDirectory() as tmp:
        async with bot(Path(tmp)) as h:
            await _quotes(h, commands=4, burst=2)  # warm-up: catalog cached, connections open
            normal = await _quotes(h, commands=COMMANDS, burst=BURST)
            await h.sim_admin("faults", {"route": "POST /v1/clusters/quote",
                                         "delaySeconds": SLOW_SECONDS, "count": COMMANDS})
            slow = await _quotes(h, commands=COMMANDS, burst=BURST)
            await h.sim_admin("faults", {}, method="DELETE")
            click, click_launched, click_ok = await _approvals(h, slow_launch=None)
            slow_click, slow_launched, slow_ok = await _approvals(h, slow_launch=SLOW_SECONDS)

    table = Table(
        f"1. Ack latency (ms): `/cluster {QUOTE}` x{COMMANDS} in bursts of {BURST} "
        f"concurrent; {CLICKS} concurrent Approves on one card",
        ["scenario", "n", "ack p50", "p95", "p99", "max", ">3s/!200", "card p50", "card p99",
         "full GCs/longest"],
    )
    table.rows += [
        normal.row("quote, provider normal"),
        slow.row(f"quote, provider +{SLOW_SECONDS:g}s"),
        click.row(f"approve x{CLICKS}, launch normal"),
        slow_click.row(f"approve x{CLICKS}, launch +{SLOW_SECONDS:g}s"),
    ]
    ratio = percentile(slow.acks, 99) / percentile(normal.acks, 99)
    table.notes += [
        f"ack p99 slow/normal = {ratio:.2f}x (1.0 = the ack does not follow the provider; "
        "a full GC inside one burst delays all of its acks at once)",
        f"quote cards arrived: {len(normal.cards or [])}/{COMMANDS} normal, "
        f"{len(slow.cards or [])}/{COMMANDS} slow (card time counted from its burst's send)",
        f"clusters launched by {CLICKS} concurrent Approves: {click_launched} (launch normal), "
        f"{slow_launched} (launch slow); the request ended `launched`: "
        f"{'yes' if click_ok and slow_ok else 'NO'}",
    ]
    return [table]
