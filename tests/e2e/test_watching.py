"""The watcher: each transition at AI Reserve becomes exactly one notice in the cluster's thread,
over many polls, provider faults and restarts; buttons act on the current state."""

from aireserve_sim.config import SimConfig
from aireserve_sim.embedded import EmbeddedSimulator
from bot.clock import ManualClock
from bot.domain.watch import NoticeKind
from bot.slack.ids import Action
from tests.e2e.harness import ALICE, BOB, DAVE, START, bot, fake_slack


async def kinds(h, cluster_id):
    async with h.rt.db.transaction() as repos:
        return [n.kind for n in await repos.notices.for_cluster(cluster_id)
                if n.kind not in (NoticeKind.REMINDER, NoticeKind.RECEIPT)]


async def test_degraded_recover_running_each_announced_once(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id = await h.running_cluster()
        await h.fail_node(cluster_id, rank=1)
        for _ in range(3):
            await h.advance(30)
        degraded = await h.notices(cluster_id, "degraded")
        assert len(degraded) == 1
        assert degraded[0].reply_broadcast  # shown in the channel too
        text = h.text_of(degraded[0])
        assert "node 1" in text.lower() or "1" in text
        assert Action.RECOVER in text and Action.AUTORECOVER_ON in text
        assert "degraded" in h.text_of(await h.top(cluster_id)).lower()

        await h.click(degraded[0], Action.RECOVER, user=ALICE)
        for _ in range(4):
            await h.advance(30)
        assert await kinds(h, cluster_id) == [
            NoticeKind.DEGRADED, NoticeKind.RECOVERY_STARTED, NoticeKind.NODE_RECOVERED,
            NoticeKind.RECOVERED]
        started = (await h.notices(cluster_id, "manual"))
        assert len(started) == 1
        recovered = h.text_of((await h.notices(cluster_id))[-1])
        assert "$" in recovered  # what the degraded time cost
        assert "running" in h.text_of(await h.top(cluster_id)).lower()

        # The old notice's button was bound to attempt 0 of that episode: pressed again, it
        # changes nothing and says who used it.
        await h.click(degraded[0], Action.RECOVER, user=ALICE)
        assert f"Already asked by <@{ALICE}>" in h.text_of(h.slack.ephemerals(ALICE)[-1])
        await h.slash(f"recover {cluster_id}", user=ALICE)  # a command acts on today's state
        assert "healthy" in h.text_of(h.slack.ephemerals(ALICE)[-1])


async def test_announced_once_across_a_restart(tmp_path, database_url):
    clock = ManualClock(START)
    async with EmbeddedSimulator(SimConfig.fast(), clock) as sim, fake_slack(clock) as slack:
        async with bot(tmp_path, slack=slack, sim=sim, database_url=database_url) as first:
            cluster_id = await first.running_cluster()
            await first.fail_node(cluster_id)
            await first.advance(30)
            assert len(await first.notices(cluster_id, "degraded")) == 1
        async with bot(tmp_path, slack=slack, sim=sim, database_url=database_url) as second:
            for _ in range(3):
                await second.advance(30)
            assert len(await second.notices(cluster_id, "degraded")) == 1
            await second.slash(f"recover {cluster_id}", user=BOB)
            for _ in range(3):
                await second.advance(30)
            assert (await kinds(second, cluster_id)).count(NoticeKind.RECOVERED) == 1


async def test_three_failed_attempts_then_exhausted_then_its_terminate_button(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id = await h.running_cluster()
        await h.fail_for_good(cluster_id)
        for _ in range(3):
            await h.slash(f"recover {cluster_id}", user=ALICE)
            await h.advance(30)
        found = await kinds(h, cluster_id)
        assert found.count(NoticeKind.RECOVERY_STARTED) == 3
        assert found.count(NoticeKind.NODE_SKIPPED) == 3
        assert found[-1] is NoticeKind.EXHAUSTED
        exhausted = (await h.notices(cluster_id))[-1]
        assert exhausted.reply_broadcast and Action.TERMINATE in h.text_of(exhausted)
        await h.slash(f"recover {cluster_id}", user=ALICE)
        assert "terminat" in h.text_of(h.slack.ephemerals(ALICE)[-1]).lower()
        await h.click(exhausted, Action.TERMINATE, user=ALICE)
        await h.advance(30)
        assert h.sim.engine.get_cluster(cluster_id).status.value == "terminated"
        assert NoticeKind.TERMINATED_OUTSIDE not in await kinds(h, cluster_id)


async def test_auto_recovery_turned_on_from_the_notice(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id, degraded = await h.degraded_cluster()
        await h.click(degraded, Action.AUTORECOVER_ON, user=BOB)
        for _ in range(6):
            await h.advance(30)
        found = await kinds(h, cluster_id)
        assert NoticeKind.RECOVERED in found
        assert len(await h.notices(cluster_id, "automatic")) >= 1


async def test_provider_faults_lose_no_transition_and_repeat_none(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id = await h.running_cluster()
        # The sweep reads the listing (a cluster missing from it, by id).
        await h.sim_admin("faults", {"route": "GET /v1/clusters", "status": 503,
                                     "count": 40})
        await h.fail_node(cluster_id)
        for _ in range(3):
            await h.advance(30)  # every poll fails
        assert await kinds(h, cluster_id) == []
        await h.sim_admin("faults", {}, method="DELETE")
        await h.sim_admin("faults", {"route": "GET /v1/clusters", "status": 429,
                                     "count": 2})
        for _ in range(3):
            await h.advance(30)
        assert await kinds(h, cluster_id) == [NoticeKind.DEGRADED]
        assert len(await h.notices(cluster_id, "degraded")) == 1


async def test_slack_429s_deliver_every_notice_exactly_once(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id = await h.running_cluster()
        await h.fail_node(cluster_id)
        h.slack.fail_next("chat.postMessage", error="ratelimited", status=429, retry_after=2,
                          count=3)
        await h.advance(30)
        await h.slash(f"recover {cluster_id}", user=ALICE)
        h.slack.fail_next("chat.postMessage", error="ratelimited", status=429, retry_after=2,
                          count=2)
        for _ in range(3):
            await h.advance(30)
        thread = [m for m in await h.notices(cluster_id)  # the notices, not the story's steps
                  if not m.blocks[0]["block_id"].startswith("story.")]
        assert len(thread) == len(await kinds(h, cluster_id)) == 4
        assert len({h.text_of(m) for m in thread}) == 4


async def test_terminated_outside_the_bot_is_announced(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id = await h.running_cluster()
        h.sim.engine.terminate(cluster_id)  # someone used AI Reserve's console
        await h.advance(30)
        await h.advance(30)
        assert await kinds(h, cluster_id) == [NoticeKind.TERMINATED_OUTSIDE]
        assert "terminated" in h.text_of(await h.top(cluster_id)).lower()
        [receipt] = await h.notices(cluster_id, "Receipt")
        assert "AI Reserve's figure" in h.text_of(receipt)


async def test_payment_grace_termination_is_broadcast_and_keeps_the_volume(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id = await h.running_cluster("quote h100x8 nodes=2 storage=500")
        await h.sim_admin("account", {"balanceCents": 0})
        for _ in range(6):
            await h.advance(1800)
        assert NoticeKind.GRACE_TERMINATED in await kinds(h, cluster_id)
        [grace] = [m for m in await h.notices(cluster_id) if m.reply_broadcast
                   and "grace" in h.text_of(m).lower()]
        assert "volume" in h.text_of(grace).lower()


async def test_failed_while_provisioning_is_announced(tmp_path):
    async with bot(tmp_path) as h:
        card = await h.request()
        await h.click(card, Action.APPROVE, user=BOB)
        cluster_id = (await h.requests_in_db())[-1].cluster_id
        await h.fail_node(cluster_id, rank=0)
        await h.advance(1)
        await h.fail_node(cluster_id, rank=0)
        await h.advance(30)
        assert await kinds(h, cluster_id) == [NoticeKind.FAILED]


async def test_notify_and_logs_commands(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id = await h.running_cluster()
        await h.slash(f"notify {cluster_id} <#C0RANDOM|random>", user=DAVE)
        assert "Only the owner" in h.text_of(h.slack.ephemerals(DAVE)[-1])
        await h.slash(f"notify {cluster_id} <#C0RANDOM|random>", user=ALICE)
        await h.fail_node(cluster_id)
        await h.advance(30)
        assert any("degraded" in h.text_of(m).lower() for m in h.slack.messages("C0RANDOM"))
        await h.slash(f"logs {cluster_id}", user=ALICE)
        logs = h.last_ephemeral(ALICE, containing="node 0")
        assert "```" in h.text_of(logs)
        await h.slash(f"logs {cluster_id} node=7", user=ALICE)
        assert "no node 7" in h.text_of(h.slack.ephemerals(ALICE)[-1])
        await h.slash(f"autorecover {cluster_id} on", user=BOB)
        assert (await h.record(cluster_id)).auto_recovery
