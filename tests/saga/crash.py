"""The launch saga's crash matrix, in process: kill the launch at one step, drop the runtime, start
a new one on the same database and the same simulator, and count what came of it.

Kill points (the steps of bot/services/launching.py):
- `before_claim`: the approval is committed (`approved`), the launch task never ran;
- `after_claim`: `launching` and the intent are committed, the launch call never left;
- `during_call`: AI Reserve carried the launch out, the answer never reached the bot (the task
  is cancelled while the HTTP call waits);
- `after_accept`: the 201 arrived, the bot died before recording it;
- `after_record`: the cluster is recorded and the request `launched`, the bot died before the
  SSH details were sent (they go out once the cluster is running).
Provider modes: `fast`; `slow` (the simulator holds the launch's answer `SLOW_SECONDS`, real
time); `expired` (the quote expired while the bot was down: 16 minutes pass before the restart).

Between the crash and the restart another replica's sweep runs (`reconcile`, what used to adopt
a half-launched cluster as untracked); after the restart the sweep runs again, a re-priced
request is approved again (the approvers' part), and the clusters boot and are polled.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aireserve_sim.config import SimConfig
from aireserve_sim.embedded import EmbeddedSimulator
from bot.clock import ManualClock
from bot.domain.models import RequestStatus
from bot.slack.ids import Action
from devslack.blockkit import buttons
from tests.e2e.harness import ALICE, BOB, START, Harness, bot, fake_slack
from tests.procs import wait_for

POINTS = ("before_claim", "after_claim", "during_call", "after_accept", "after_record")
MODES = ("fast", "slow", "expired")
SLOW_SECONDS = 1.0


class Killed(asyncio.CancelledError):
    """The launch task dies here, as it would when its process is killed."""


@dataclass(frozen=True)
class Outcome:
    point: str
    mode: str
    clusters: int          # clusters AI Reserve made
    per_request_max: int   # the most clusters any one request got
    unlinked: int          # clusters without a record linked to a request and its owner
    ssh_dms: Counter[str]  # SSH-details DMs per cluster id
    requests: list[RequestStatus]
    repriced: bool         # the request went back to the approvers (no cluster existed)

    @property
    def held(self) -> bool:
        return (self.clusters == 1 and self.per_request_max == 1 and self.unlinked == 0
                and list(self.ssh_dms.values()) == [1]
                and self.requests == [RequestStatus.LAUNCHED])


def arm_kill(h: Harness, point: str) -> None:
    """Make the launch task die at `point` (the approval itself always commits)."""
    provider, launching, sim = h.rt.provider, h.rt.services.launching, h.sim
    real: Callable[..., Awaitable[Any]] = provider.launch_cluster
    if point == "before_claim":
        launching.launch_soon = lambda request_id: None  # type: ignore[method-assign]
        return
    if point == "after_claim":
        async def never_sent(*args: Any, **kwargs: Any) -> Any:
            raise Killed()
        provider.launch_cluster = never_sent  # type: ignore[method-assign]
    elif point == "during_call":
        async def lost_answer(*args: Any, **kwargs: Any) -> Any:
            call = asyncio.ensure_future(real(*args, **kwargs))
            await wait_for(lambda: bool(sim.engine.list_clusters()) or call.done(), within=10,
                           interval=0.01, what="AI Reserve to take the launch")
            call.cancel()
            raise Killed()
        provider.launch_cluster = lost_answer  # type: ignore[method-assign]
    elif point == "after_accept":
        async def unrecorded(*args: Any, **kwargs: Any) -> Any:
            await real(*args, **kwargs)
            raise Killed()
        provider.launch_cluster = unrecorded  # type: ignore[method-assign]
    elif point != "after_record":
        raise ValueError(point)


async def run(tmp_path: Path, *, point: str, mode: str,
              database_url: str | None = None) -> Outcome:
    clock = ManualClock(START)
    async with EmbeddedSimulator(SimConfig.fast(), clock) as sim, fake_slack(clock) as slack:
        async with bot(tmp_path, slack=slack, sim=sim, database_url=database_url) as first:
            card = await first.request()
            if mode == "slow":
                await first.sim_admin("faults", {"route": "POST /v1/clusters",
                                                 "delaySeconds": SLOW_SECONDS, "count": 2})
            arm_kill(first, point)
            await first.click(card, Action.APPROVE, user=BOB)
            if mode == "expired":
                clock.advance(16 * 60)
            await first.rt.services.reconciling.reconcile()  # another replica's sweep
        async with bot(tmp_path, slack=slack, sim=sim, database_url=database_url) as second:
            h = second
            await h.rt.services.reconciling.reconcile()
            await h.rt.settle()
            # … and its delivery sweep: a fresh card the first replica's re-pricing could not
            # post before it died (queued in the outbox) goes out now.
            await h.rt.services.watching.deliver()
            repriced = False
            for request in await h.requests_in_db():
                if request.status is RequestStatus.PENDING:  # no cluster: asked again
                    repriced = True
                    [*_, fresh] = [card for card in h.cards() if any(
                        b.action_id == Action.APPROVE for b in buttons(card.blocks))]
                    await h.click(fresh, Action.APPROVE, user=BOB)
            for _ in range(3):  # boot, then polls: the SSH details go out once
                await h.advance(60)
                await h.rt.services.reconciling.reconcile()
            return await outcome(h, point=point, mode=mode, repriced=repriced)


async def outcome(h: Harness, *, point: str, mode: str, repriced: bool) -> Outcome:
    clusters = h.sim.engine.list_clusters()
    async with h.rt.db.transaction() as repos:
        held = await repos.request_quotes.requests_of([c.quote_id for c in clusters])
        records = {c.id: await repos.clusters.get(c.id) for c in clusters}
        requests = await repos.requests.list_by_status(list(RequestStatus))
    owners = {r.id: r.requester_id for r in requests}
    unlinked = 0
    for c in clusters:
        record, request_id = records[c.id], held.get(c.quote_id)
        if (record is None or request_id is None or record.request_id != request_id
                or record.owner_id != owners[request_id]):
            unlinked += 1
    per_request = Counter(held[c.quote_id] for c in clusters if c.quote_id in held)
    dms = Counter(c.id for c in clusters for m in h.slack.dms(ALICE)
                  if "ssh -p" in h.text_of(m) and c.id in h.text_of(m))
    return Outcome(point=point, mode=mode, clusters=len(clusters),
                   per_request_max=max(per_request.values(), default=0), unlinked=unlinked,
                   ssh_dms=dms, requests=[r.status for r in requests], repriced=repriced)
