"""A shared volume's own hours count wherever spend is counted — App Home's month, the budget
check — at what AI Reserve's ledger charged, and its monthly price is the provider's."""

import json
import re

from bot.services.approvals import _committed
from bot.slack.ids import Action
from tests.e2e.harness import ALICE, bot


def ledger_cents(h, start, end):
    return sum(e.cents for e in h.sim.engine.ledger()
               if e.kind in ("cluster_hour", "volume_hour") and start <= e.at < end)


async def test_home_and_the_budget_count_a_kept_volume_and_the_month_price_is_the_providers(
        tmp_path):
    async with bot(tmp_path) as h:
        start = h.clock.now().replace(day=1, hour=0, minute=0)
        cluster_id = await h.running_cluster("quote h100x8 nodes=2 storage=2670")
        volume_id = h.sim.engine.get_cluster(cluster_id).volume.id
        await h.click(await h.top(cluster_id), Action.TERMINATE, user=ALICE)
        for _ in range(5 * 6):  # five hours kept: it bills on its own
            await h.advance(600)
        await h.rt.services.volumes.sync()
        own = [e for e in h.sim.engine.ledger() if e.resource_id == volume_id]
        assert len(own) >= 4 and all(e.cents == 26 for e in own)

        await h.requests.app_home_opened(ALICE)
        await h.rt.settle()
        home = json.dumps(h.slack.home(ALICE))
        spent = re.findall(r"\*\$([\d,]+\.\d\d)\* spent in", home)
        now = h.clock.now()
        truth = ledger_cents(h, start, now.replace(microsecond=1))
        assert spent and int(spent[0].replace(",", "").replace(".", "")) == truth, home

        async with h.rt.db.transaction() as repos:
            held = await _committed(repos, h.rt.services.people.policy, requester=ALICE,
                                    now=now)
        # What the month holds: charged so far, and the kept volume's hours to the month end.
        end = start.replace(month=start.month % 12 + 1) if start.month < 12 else \
            start.replace(year=start.year + 1, month=1)
        h.clock.advance((end - now).total_seconds() - 1)
        assert held.user_cents == ledger_cents(h, start, end)

        await h.slash("volumes")
        listed = h.text_of(h.last_ephemeral(ALICE, containing="Shared volumes"))
        assert "$186.90/month" in listed and "$189.80" not in listed  # 2,670 GB × 7 ¢


async def test_a_stored_volume_ai_reserve_no_longer_knows_stops_counting(tmp_path):
    """Deleted long ago and purged (AI Reserve answers 404 by id): it bills no more, so no
    report or budget goes on charging it."""
    from bot.domain.models import VolumeRecord
    async with bot(tmp_path) as h:
        now = h.clock.now()
        async with h.rt.db.transaction() as repos:
            await repos.volumes.upsert(VolumeRecord(
                id="vol_gone", owner_id=ALICE, cluster_id=None, size_gb=1000,
                location="us-tx", hourly_cents=10, status="available", updated_at=now,
                created_at=now))
        h.clock.advance(3600)
        await h.rt.services.volumes.sync()
        async with h.rt.db.transaction() as repos:
            stored = await repos.volumes.get("vol_gone")
        assert stored is not None and stored.status == "deleted"
        assert stored.deleted_at == h.clock.now()


async def test_one_poll_across_a_whole_outage_says_what_ai_reserve_charged(tmp_path):
    """The bot sees the cluster before an outage and after it (a long poll gap: restarted,
    or the clock jumped): every node was down across two marks, which AI Reserve did not
    charge, and a later mark was charged. The recovered notice says the outage cost nothing
    (it said "$62.53: 1 hourly charge"), and the billed-hours chart has its uncharged cells
    where the outage was, not an hour late."""
    from bot.domain.hours import HourState

    async with bot(tmp_path) as h:
        cluster_id = await h.running_cluster()
        ready = h.sim.engine.get_cluster(cluster_id).ready_at
        h.clock.advance(20 * 60)
        for rank in (0, 1):  # at AI Reserve only: the bot does not poll meanwhile
            await h.fail_node(cluster_id, rank=rank)
        h.clock.advance(2 * 3600)  # the marks at +1 h and +2 h pass with every node down
        h.sim.engine.recover(cluster_id)
        h.clock.advance(3600)  # back, and charged at +3 h
        await h.advance(0)  # one poll across all of it
        ledger = [e.at for e in h.sim.engine.ledger()
                  if e.resource_id == cluster_id and e.kind == "cluster_hour"]
        assert [round((at - ready).total_seconds() / 3600) for at in ledger] == [0, 3]
        recovered = (await h.notices(cluster_id, "No hourly charge") or await h.notices(
            cluster_id, "hourly charge"))[-1]
        text = h.text_of(recovered)
        assert "No hourly charge fell inside it" in text and "1 hourly charge" not in text, text
        _, marks = await h.rt.services.clusters.billed_hours(cluster_id=cluster_id)
        # The first hour overlaps the outage's start (degraded); the last one is after it.
        assert [s for _, s in marks] == [HourState.DEGRADED, HourState.NOT_BILLED,
                                         HourState.NOT_BILLED, HourState.BILLED]
