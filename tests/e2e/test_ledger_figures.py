"""Every dollar figure the bot shows, against AI Reserve's own ledger.

Seeded random lifecycles run a whole bot (FakeSlack ⇄ Bolt ⇄ services ⇄ embedded simulator) on one
ManualClock: random shapes, with or without a shared volume, node failures and recoveries across
hour boundaries (every node down at some hour marks, which AI Reserve does not charge),
terminations at random minutes, volumes deleted or kept, kept volumes grown (`/cluster volume
grow`) and mounted again by a later cluster (`quote … volume=`), volumes created at AI Reserve
directly (outside the bot), and clocks that start at random times of 30 November so that many
lifecycles cross into December. After every step
each message, DM, ephemeral and Home view that is new or edited is read, and every money figure
in it is compared with what the simulator's ledger says (`GET /_sim/ledger`'s entries):

- what a cluster has cost so far / in all (reminders, receipts, terminated lines, Home, notices);
- what a degraded episode cost (the charges the ledger holds between the provider's
  `cluster.degraded` and `cluster.recovered` events);
- `/cluster spend`: the month's total, each cluster, each volume billing on its own, each owner;
- the rates ($/h, per day) in cluster messages: the cluster's locked rate (what one ledger hour
  charges); "together $X/h": the rates of the clusters the provider is charging now.

The projection in `/cluster spend` is a forecast, not a ledger figure: it is not compared.
"""

from __future__ import annotations

import os
import random
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from aireserve_sim.config import SimConfig
from aireserve_sim.embedded import EmbeddedSimulator
from bot.clock import ManualClock
from bot.domain.spend import accruals_before
from bot.reserve.schemas import ClusterStatus, VolumeCreateRequest
from bot.slack.ids import Action
from devslack.models import Message
from tests.e2e.harness import ALICE, BOB, Harness, bot

# 16 in the suite, in two halves (seeds 0–7 and 8–15: each does everything the assertions ask
# for, and the halves run side by side under xdist); `LEDGER_LIFECYCLES=32` for the figure the
# report quotes.
LIFECYCLES = int(os.environ.get("LEDGER_LIFECYCLES", "16"))
HALVES = (range(LIFECYCLES // 2), range(LIFECYCLES // 2, LIFECYCLES))
SHAPES = ("h100x8", "h100x4", "h200x8", "a100x8", "a100x2", "mi300xx8", "l40sx4", "b200x8")
MONEY = r"\$([\d,]+\.\d\d)"
BILLING = (ClusterStatus.RUNNING, ClusterStatus.DEGRADED)


def cents(text: str) -> int:
    return int(text.replace(",", "").replace(".", ""))


def strings(node: Any) -> Iterator[str]:
    """Every text a person reads in a message or view (block texts, fields, the fallback)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "text" and isinstance(value, str):
                yield value
            elif key not in ("action_id", "value", "block_id"):
                yield from strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from strings(item)


@dataclass
class Check:
    h: Harness
    tried: int = 0
    mismatches: list[str] = field(default_factory=list)
    seen: dict[tuple[str, str], int] = field(default_factory=dict)
    episodes_matched: dict[str, int] = field(default_factory=dict)
    figures: dict[str, int] = field(default_factory=dict)
    uncharged_episodes: int = 0
    # What the lifecycle did that volumes' charges depend on (the test asserts each happened).
    did: dict[str, int] = field(default_factory=dict)
    outside: set[str] = field(default_factory=set)  # volumes created at AI Reserve directly

    def count(self, what: str) -> None:
        self.did[what] = self.did.get(what, 0) + 1

    # --- the ledger ------------------------------------------------------------------------

    def ledger(self) -> list[Any]:
        return self.h.sim.engine.ledger()

    def charged(self, resource: str, *, start: datetime | None = None,
                end: datetime | None = None) -> int:
        return sum(e.cents for e in self.ledger() if e.resource_id == resource
                   and e.kind in ("cluster_hour", "volume_hour")
                   and (start is None or e.at >= start) and (end is None or e.at < end))

    def rate(self, cluster_id: str) -> int:
        return self.h.sim.engine.get_cluster(cluster_id).locked_rate.hourly_cents

    def clusters(self) -> list[Any]:
        return self.h.sim.engine.list_clusters()

    def expect(self, what: str, shown: int, truth: int, where: str) -> None:
        self.tried += 1
        self.figures[what] = self.figures.get(what, 0) + 1
        if shown != truth:
            self.mismatches.append(f"{what}: shown {shown}, ledger {truth} — {where[-1500:]}")

    # --- reading what the bot showed --------------------------------------------------------

    def fresh_messages(self) -> list[Message]:
        out = []
        for m in self.h.slack.all_messages():
            key = (m.channel, m.ts)
            version = len(m.edits) + 1
            if self.seen.get(key) != version and not m.deleted:
                self.seen[key] = version
                out.append(m)
        return out

    def step(self) -> None:
        for m in self.fresh_messages():
            self.message(m)

    def message(self, m: Message) -> None:
        texts = [m.text, *strings(m.blocks)]
        whole = "\n".join(texts)
        ids = set(re.findall(r"clu_[A-Za-z0-9]+", whole))
        block_ids = " ".join(b.get("block_id", "") for b in m.blocks)
        if block_ids.startswith("spend"):
            self.spend(whole)
            return
        if block_ids.startswith("list"):
            self.together(whole, [c.id for c in self.clusters()])
            return
        if len(ids) != 1:
            return
        cluster_id = ids.pop()
        total = self.charged(cluster_id)
        rate = self.rate(cluster_id)
        per_gpu = self.h.sim.engine.get_cluster(cluster_id).locked_rate.per_gpu_hourly_cents
        for text in texts:
            for shown, gpu in re.findall(MONEY + r"/h( per GPU)?", text):
                if gpu:
                    self.expect("rate per GPU", cents(shown), per_gpu, text)
                else:
                    self.expect("rate $/h", cents(shown), rate, text)
            for shown in re.findall(MONEY + r" per day", text):
                self.expect("rate per day", cents(shown), rate * 24, text)
            for shown in re.findall(r"(?:bills |paid \(|next charge of |saves )" + MONEY, text):
                self.expect("rate $/h", cents(shown), rate, text)
        if block_ids.startswith("notice.recovered"):
            self.recovered(cluster_id, whole)
        for pattern, what in ((r"accrued \*" + MONEY + r"\* so far", "cost so far"),
                              (r"has accrued " + MONEY, "cost so far"),
                              (r"\*Accrued so far\*\n" + MONEY, "cost so far")):
            for shown in re.findall(pattern, whole):
                self.expect(what, cents(shown), total, whole)
        for pattern in (r"Cost: " + MONEY + r" over", r"Receipt\* for .*?: " + MONEY,
                        r"\*Total cost\*\n\*" + MONEY, r": " + MONEY + r" over \d+ billed",
                        r"it had accrued " + MONEY):
            for shown in re.findall(pattern, whole):
                self.expect("cost in all", cents(shown), total, whole)

    def recovered(self, cluster_id: str, text: str) -> None:
        events = self.h.sim.engine.events(cluster_id)
        recoveries = [e for e in events if e.type == "cluster.recovered"]
        n = self.episodes_matched.get(cluster_id, 0)
        self.episodes_matched[cluster_id] = n + 1
        episode = recoveries[n].data["episode"]
        start = next(e.at for e in events if e.type == "cluster.degraded"
                     and e.data["episode"] == episode)
        truth = self.charged(cluster_id, start=start, end=recoveries[n].at)
        ready = self.h.sim.engine.get_cluster(cluster_id).ready_at
        assert ready is not None
        marks = accruals_before(ready, recoveries[n].at) - accruals_before(ready, start)
        if truth < marks * self.rate(cluster_id):  # some marks fell while every node was down
            self.uncharged_episodes += 1
        found = re.findall(r"which cost \*" + MONEY + r"\*", text)
        if "No hourly charge fell inside it" in text:
            self.expect("degraded episode cost", 0, truth, text)
        elif found:
            self.expect("degraded episode cost", cents(found[0]), truth, text)
        else:
            self.mismatches.append(f"recovered notice without a cost: {text[:200]}")

    def together(self, text: str, cluster_ids: list[str]) -> None:
        billing = sum(c.locked_rate.hourly_cents for c in self.clusters()
                      if c.id in cluster_ids and c.status in BILLING)
        found = re.findall(r"together \*" + MONEY + r"/h\*", text)
        if found:
            self.expect("together $/h", cents(found[0]), billing, text)
        elif billing:
            self.mismatches.append(f"no together figure while {billing} bills: {text[:200]}")
        else:
            self.expect("together $/h", 0, billing, text)
        for line in text.split("\n"):
            ids = re.findall(r"clu_[A-Za-z0-9]+", line)
            for shown in re.findall(MONEY + r"/h", line):
                if len(ids) == 1:
                    self.expect("rate $/h", cents(shown), self.rate(ids[0]), line)
            for shown in re.findall(MONEY + r" so far", line):
                if len(ids) == 1:
                    self.expect("cost so far", cents(shown), self.charged(ids[0]), line)

    def spend(self, text: str, month: tuple[datetime, datetime] | None = None) -> None:
        now = self.h.clock.now()
        start, end = month or month_of(now)
        end = min(end, now + timedelta(microseconds=1))
        entries = [e for e in self.ledger() if e.kind in ("cluster_hour", "volume_hour")
                   and start <= e.at < end]
        total = re.findall(r"\*Total: " + MONEY + r"\*", text)
        self.expect("spend total", cents(total[0]), sum(e.cents for e in entries), text)
        volumes = re.findall(MONEY + r" for volumes on their own", text)
        volume_truth = sum(e.cents for e in entries if e.kind == "volume_hour")
        self.expect("spend volumes", cents(volumes[0]) if volumes else 0, volume_truth, text)
        for line in text.split("\n"):
            found = re.findall(r"`((?:clu|vol)_[A-Za-z0-9]+)`.* — \*" + MONEY + r"\*", line)
            for resource, shown in found:
                truth = sum(e.cents for e in entries if e.resource_id == resource)
                self.expect("spend per cluster/volume", cents(shown), truth, line)
            # Alice owns every cluster and every volume but those made outside the bot.
            alice = sum(e.cents for e in entries if e.resource_id not in self.outside)
            for shown in re.findall(r"^• <@U0ALICE> — \*" + MONEY + r"\*", line):
                self.expect("spend per owner", cents(shown), alice, line)

    async def projection(self) -> None:
        """`/cluster spend`'s "≈ $P more to the end of the month", checked by letting the
        month run out with nobody acting: the ledger's charges after now must add up to P.
        Skipped while a cluster has every node down (whether its next marks are charged
        depends on a recovery nobody has asked for yet)."""
        now = self.h.clock.now()
        _, end = month_of(now)
        if end - now > timedelta(days=1):  # a month on, the account would run dry: keep it short
            return
        wires = self.clusters()
        if any(c.status in BILLING and not any(n.status.value == "running" for n in c.nodes)
               for c in wires) or any(c.status.value == "provisioning" for c in wires):
            return
        await self.h.slash("spend")
        shown = [m for m in self.fresh_messages()
                 if any(b.get("block_id", "").startswith("spend") for b in m.blocks)]
        text = "\n".join(t for m in shown for t in [m.text, *strings(m.blocks)])
        found = re.findall(r"add ≈ " + MONEY + r" more from now to the end of the month", text)
        projected = cents(found[0]) if found else 0
        self.h.clock.advance((end - now).total_seconds() - 1)
        truth = sum(e.cents for e in self.ledger() if e.kind in ("cluster_hour", "volume_hour")
                    and now < e.at < end)
        by_resource: dict[str, int] = {}
        for e in self.ledger():
            if e.kind in ("cluster_hour", "volume_hour") and now < e.at < end:
                by_resource[e.resource_id] = by_resource.get(e.resource_id, 0) + e.cents
        states = {c.id: (c.status.value, [n.status.value for n in c.nodes],
                         c.volume.id if c.volume else None) for c in self.clusters()}
        self.expect("spend projection to month end", projected, truth,
                    f"{text} || now {now} by resource {by_resource} states {states}")
        await self.h.advance(1)  # the bot polls again: what it shows next is of the new month
        self.step()

    async def home(self) -> None:
        await self.h.requests.app_home_opened(ALICE)
        await self.h.rt.settle()
        view = self.h.slack.home(ALICE)
        if view is None:
            return
        text = "\n".join(strings(view.get("blocks", [])))
        mine = [c.id for c in self.clusters()]
        if "Your live clusters" in text and "no live clusters" not in text:
            self.together(text, mine)


def month_of(now: datetime) -> tuple[datetime, datetime]:
    start = datetime(now.year, now.month, 1, tzinfo=UTC)
    end = datetime(now.year + now.month // 12, now.month % 12 + 1, 1, tzinfo=UTC)
    return start, end


# --- driving one lifecycle ---------------------------------------------------------------------


async def launch(h: Harness, rnd: random.Random, *, volume: str | None = None) -> str | None:
    shape = rnd.choice(SHAPES)
    nodes = rnd.randint(2, 8)
    storage = rnd.choice(("", "", f" storage={rnd.randint(10, 4096)}"))
    if volume is not None:
        storage = f" volume={volume}"  # mounted again: pinned to the volume's location
    before = {r.id for r in await h.requests_in_db()}
    await h.slash(f"quote {shape} nodes={nodes}{storage}")
    cards = [m for m in h.slack.ephemerals(ALICE) if Action.QUOTE_REQUEST_LAUNCH in
             h.text_of(m)]
    if not cards:
        return None  # no stock for it: the card says so and offers no launch
    await h.click(cards[-1], Action.QUOTE_REQUEST_LAUNCH, user=ALICE)
    modal = h.slack.last_view(ALICE)
    assert modal is not None
    await h.submit(modal, user=ALICE)
    await h.click(h.cards()[-1], Action.APPROVE, user=BOB)
    # The request just made: requests made at one instant (the clock stands still between
    # launches) are ordered by their random ids, so the newest is not always the last listed.
    [made] = [r for r in await h.requests_in_db() if r.id not in before]
    return made.cluster_id


async def advance(h: Harness, check: Check, seconds: float) -> None:
    await h.advance(seconds)
    await h.rt.services.volumes.sync()  # the orphaned-volume sweep
    check.step()


def not_on_an_anchor(h: Harness, cluster_id: str) -> bool:
    """A node failed through the control API at the very instant of an hour charge would be
    charged before it failed; the test keeps failures off those instants."""
    wire = h.sim.engine.get_cluster(cluster_id)
    if wire.ready_at is None:
        return True
    return (h.clock.now() - wire.ready_at).total_seconds() % 3600 != 0


async def lifecycle(tmp_path: Any, seed: int) -> Check:
    rnd = random.Random(seed)
    start = datetime(2026, 11, 30, rnd.randint(0, 23), rnd.randint(0, 59), rnd.randint(0, 59),
                     tzinfo=UTC)
    (tmp_path / f"seed{seed}").mkdir(exist_ok=True)
    clock = ManualClock(start)
    # The simulator is seeded too (its ids order its lists): a seed replays the same lifecycle.
    async with EmbeddedSimulator(SimConfig.fast(), clock, seed=seed) as sim, \
            bot(tmp_path / f"seed{seed}", sim=sim, clock=clock) as h:
        check = Check(h)
        for _ in range(rnd.choice((0, 0, 1, 2))):  # made outside the bot: nobody owns it
            made = h.sim.engine.create_volume(VolumeCreateRequest(
                size_gb=rnd.randint(10, 4096), location="us-tx"))
            check.outside.add(made.id)
            check.count("outside volumes")
        clusters = [c for c in [await launch(h, rnd) for _ in range(rnd.randint(1, 3))] if c]
        check.step()
        for _ in range(rnd.randint(8, 30)):
            await advance(h, check, rnd.randint(60, 55 * 60) + rnd.randint(0, 59))
            live = [c for c in clusters
                    if h.sim.engine.get_cluster(c).status in BILLING]
            roll = rnd.random()
            if live and roll < 0.3:
                target = rnd.choice(live)
                wire = h.sim.engine.get_cluster(target)
                up = [n.rank for n in wire.nodes if n.status.value == "running"]
                if up and not_on_an_anchor(h, target):
                    if rnd.random() < 0.15:
                        h.sim.engine.set_recoverable(target, up[-1], False)
                    # Sometimes every node goes down: hour marks then pass uncharged (§5.3).
                    failing = up if rnd.random() < 0.25 else [rnd.choice(up)]
                    if failing == up:
                        check.count("every node down")
                    for rank in failing:
                        await h.fail_node(target, rank=rank,
                                          mode=rnd.choice(("stopped", "unhealthy")))
            elif live and roll < 0.55:
                target = rnd.choice(live)
                if h.sim.engine.get_cluster(target).status is ClusterStatus.DEGRADED:
                    await h.slash(f"recover {target}")
            elif live and roll < 0.6:
                target = rnd.choice(live)
                await h.slash(f"terminate {target}")
                prompt = h.last_ephemeral(ALICE, containing=Action.TERMINATE)
                await h.click(prompt, Action.TERMINATE, user=ALICE)
            elif roll < 0.63:
                kept = [v for v in h.sim.engine.list_volumes() if v.status.value == "available"]
                if kept:
                    h.sim.engine.delete_volume(rnd.choice(kept).id)
            elif roll < 0.68:
                kept = [v for v in h.sim.engine.list_volumes()
                        if v.status.value == "available" and v.size_gb < 4096]
                if kept:  # grown while detached: its later hours bill at the new size
                    target = rnd.choice(kept)
                    size = min(4096, target.size_gb + rnd.randint(1, 2000))
                    await h.slash(f"volume grow {target.id} {size}", user=BOB)
                    if h.sim.engine.get_volume(target.id).size_gb == size:
                        check.count("grows")
            elif roll < 0.74:
                kept = [v for v in h.sim.engine.list_volumes() if v.status.value == "available"]
                if kept:  # a later cluster mounts a kept volume again
                    again = await launch(h, rnd, volume=rnd.choice(kept).id)
                    if again:
                        clusters.append(again)
                        check.count("remounts")
            elif roll < 0.78:
                await h.slash("list")
            elif roll < 0.84:
                await h.slash(f"status {rnd.choice(clusters)}")
            elif roll < 0.92:
                await h.slash("spend")
            else:
                await check.home()
            check.step()
        await h.slash("spend")
        check.step()
        await check.projection()
        if h.clock.now().month == 12:
            await h.slash("spend 2026-11")
            for m in check.fresh_messages():
                check.spend("\n".join([m.text, *strings(m.blocks)]),
                            month=(datetime(2026, 11, 1, tzinfo=UTC),
                                   datetime(2026, 12, 1, tzinfo=UTC)))
        await check.home()
        return check


@pytest.mark.slow  # a longer scenario: scheduled early (tests/conftest.py)
@pytest.mark.parametrize("seeds", HALVES, ids=["first-half", "second-half"])
async def test_every_dollar_figure_matches_the_ledger(tmp_path, seeds):
    tried, mismatches, uncharged = 0, [], 0
    figures: dict[str, int] = {}
    did: dict[str, int] = {}
    for seed in seeds:
        check = await lifecycle(tmp_path, seed)
        tried += check.tried
        uncharged += check.uncharged_episodes
        mismatches += [f"seed {seed}: {m}" for m in check.mismatches]
        for what, n in check.figures.items():
            figures[what] = figures.get(what, 0) + n
        for what, n in check.did.items():
            did[what] = did.get(what, 0) + n
    # The figure (shown with `pytest -s`): lifecycles, figures tried and held, mismatches, by
    # kind, and what the lifecycles did that volumes' and clusters' charges depend on.
    sys.stdout.write(f"\nledger figures: {len(seeds)} lifecycles, {tried} figures tried, "
                     f"{tried - len(mismatches)} held, {len(mismatches)} mismatches "
                     f"({uncharged} episodes with hour marks uncharged: every node down); "
                     f"did {did}; by kind {figures}\n")
    assert figures.get("degraded episode cost", 0) > 0 and figures.get("spend volumes", 0) > 0
    for what in ("grows", "remounts", "outside volumes", "every node down"):
        assert did.get(what, 0) > 0, f"no {what} in lifecycles {seeds}"
    kinds: dict[str, str] = {}
    for m in mismatches:
        kinds.setdefault(m.split(":")[1], m)
    assert mismatches == [], "\n".join(kinds.values())
