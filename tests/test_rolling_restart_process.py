"""A rolling restart loses no request (issue 24, item 5): two replicas, as real processes, behind
a load balancer that follows readiness (tests/balancer.py: /readyz polled every 0.25 s, out
after two failures as deploy/kubernetes's probe says, only ready replicas routed to, no
retries), under a steady stream of signed slash commands and button clicks. Replica A gets
SIGTERM, exits 0, starts again and is ready; then the same for B. Every request sent through the
balancer is answered 200: none refused, cut or turned away. (An ack later than 3 s on a loaded
machine is the ack tail's, measured by `make bench`; it is reported in the failure message.)

Before the drain (LISTENER_DRAIN_SECONDS=0, the old behaviour) a replica closed its listener at
the SIGTERM while the balancer still routed to it until its next probe: requests were refused.
"""

from __future__ import annotations

import asyncio
import signal
from dataclasses import dataclass

import aiohttp
import pytest

from bot.slack.ids import Action, ClusterRef
from devslack.models import ACK_DEADLINE, Message
from devslack.requests import SlackRequests
from tests.balancer import Balancer
from tests.procs import ALICE, BOB, GENERAL, SECRET, BotProcess, World, wait_for, world

pytestmark = pytest.mark.procs  # timed: it counts what a real second lets through

DRAIN = 4.0  # > two probe periods (a busy machine stretches them) + an answer in flight
PROBE_EVERY = 0.25
PACE = 0.15  # between two requests of the stream: ~6 a second, one click in four


def _status_button(w: World) -> Message:
    """A message with a Status button (for a cluster nobody has): a click acks at once and is
    answered "not found" through its response_url, changing nothing."""
    return w.slack.post(channel=GENERAL, text="status", via="chat.postMessage", blocks=[{
        "type": "actions", "elements": [{
            "type": "button", "action_id": Action.CLUSTER_STATUS,
            "text": {"type": "plain_text", "text": "Status"},
            "value": ClusterRef(cluster_id="clu_gone").pack()}]}])


@dataclass
class Outcome:
    sent: int
    lost: list[str]  # refused, cut or answered other than 200: what Slack would not get
    late: list[float]  # answered 200 after Slack's 3 s (a loaded machine: not the restart's)
    during: list[int]  # requests sent while each replica restarted (SIGTERM to routed again)
    balancer: Balancer


async def rolling_restart(w: World, *, drain: float) -> Outcome:
    """Two replicas restarted one after the other under the stream."""
    env = {"LISTENER_DRAIN_SECONDS": str(drain)}
    a, b = await asyncio.gather(w.bot("a", env=env), w.bot("b", env=env))
    button = _status_button(w)
    async with Balancer([a, b], probe_every=PROBE_EVERY).running() as lb, \
            SlackRequests(events_url=f"{lb.url}/slack/events", signing_secret=SECRET,
                          slack=w.slack) as slack:
        await wait_for(lambda: lb.ready == {"a", "b"}, within=30, what="both replicas ready")
        sent = 0
        lost: list[str] = []
        late: list[float] = []  # 200, but after Slack's 3 s: the machine's load, reported
        stop = asyncio.Event()

        async def one(n: int) -> None:
            try:
                reply = await (slack.click(button, Action.CLUSTER_STATUS, user_id=BOB)
                               if n % 4 == 3 else
                               slack.slash(text="help", user_id=ALICE, channel_id=GENERAL))
            except aiohttp.ClientError as exc:
                lost.append(f"no answer: {type(exc).__name__}")
                return
            if reply.status != 200:
                lost.append(f"{reply.status} in {reply.elapsed:.1f} s")
            elif reply.elapsed > ACK_DEADLINE:
                late.append(reply.elapsed)

        async def stream() -> None:
            nonlocal sent
            tasks: set[asyncio.Task[None]] = set()
            while not stop.is_set():
                sent += 1
                task = asyncio.create_task(one(sent))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                await asyncio.sleep(PACE)  # the stream's pace, not a wait for time to pass
            await asyncio.gather(*tasks)

        streaming = asyncio.create_task(stream())
        during: list[int] = []
        for bot in (a, b):
            before = sent
            await restart(lb, bot)
            during.append(sent - before)
        await lb.probed()
        stop.set()
        await streaming
    return Outcome(sent=sent, lost=lost, late=late, during=during, balancer=lb)


async def restart(lb: Balancer, bot: BotProcess) -> None:
    """SIGTERM, exit 0, start again, routed to again."""
    bot.signal(signal.SIGTERM)
    assert await bot.wait(within=30) == 0
    await bot.start()
    await wait_for(lambda: bot.name in lb.ready, within=30, what=f"{bot.name} ready again")


@pytest.mark.postgres
async def test_a_rolling_restart_of_two_replicas_loses_no_request(tmp_path, pg_url):
    async with world(tmp_path, database_url=pg_url) as w:
        got = await rolling_restart(w, drain=DRAIN)
    lb = got.balancer
    # With LISTENER_DRAIN_SECONDS=0 (before the drain): 4 of 332 refused (502), two per restart.
    assert got.lost == [] and lb.lost == [], (got.lost, lb.lost, lb.changes, got.late)
    # The stream ran through both restarts: the drain alone is 4 s, ~26 requests at its pace.
    assert min(got.during) >= 20, got.during
    # Both replicas answered, before and after their restart (each run: a new port).
    assert lb.served["a"] > 10 and lb.served["b"] > 10, lb.served
