"""Readiness, the docs' way: after `running` the bot follows the workload's log for the owner's
readiness line and posts **Serving** once — on the first poll, after hours, across a restart,
on a degraded cluster — or, when the limit passes first, asks the owner (once per limit) with
the last lines, what not serving billed, and Terminate / Keep waiting."""

from aireserve_sim.config import SimConfig
from aireserve_sim.embedded import EmbeddedSimulator
from bot.clock import ManualClock
from bot.domain.readiness import PRESETS
from bot.domain.watch import NoticeKind
from bot.slack.blocks.launch_modal import (
    FIELD_READINESS,
    FIELD_READINESS_ALL,
    FIELD_READINESS_LIMIT,
    READINESS_ALL_ON,
)
from bot.slack.ids import Action
from tests.e2e.harness import ALICE, BOB, START, bot, fake_slack

VLLM_LINE = "INFO:     Application startup complete."


def readiness(pattern="vllm", *, limit=None, all_ranks=False):
    values = {FIELD_READINESS: {FIELD_READINESS: pattern}}
    if limit is not None:
        values[FIELD_READINESS_LIMIT] = {FIELD_READINESS_LIMIT: str(limit)}
    if all_ranks:
        values[FIELD_READINESS_ALL] = {FIELD_READINESS_ALL: [READINESS_ALL_ON]}
    return values


async def launched(h, values, text="quote h100x8 nodes=2"):
    """Request with a readiness rule and approve; the cluster boots on the clock, unpolled."""
    card = await h.request(quote_text=text, values=values)
    await h.click(card, Action.APPROVE, user=BOB)
    cluster_id = (await h.requests_in_db())[-1].cluster_id
    assert cluster_id is not None
    return cluster_id


async def say(h, cluster_id, line, rank=0):
    await h.sim_admin(f"clusters/{cluster_id}/nodes/{rank}/log", {"line": line})


async def kinds(h, cluster_id):
    async with h.rt.db.transaction() as repos:
        return [n.kind for n in await repos.notices.for_cluster(cluster_id)
                if n.kind in (NoticeKind.SERVING, NoticeKind.NOT_SERVING)]


def asked(h, user=ALICE):
    return [m for m in h.slack.dms(user) if Action.KEEP_WAITING in h.text_of(m)]


async def test_serving_found_on_the_first_poll(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id = await launched(h, readiness("vllm"))
        h.clock.advance(60)  # the cluster is running at AI Reserve; nobody has polled yet
        await say(h, cluster_id, VLLM_LINE)
        await h.advance(0)
        [serving] = await h.notices(cluster_id, "is serving")
        record = await h.record(cluster_id)
        text = h.text_of(serving)
        # One hour mark (at ready) billed while getting there, at the locked rate.
        assert f"1 hourly charge of ${record.hourly_cents / 100:,.2f}/h" in text, text
        assert "Serving since" in h.text_of(await h.top(cluster_id))
        for _ in range(5):
            await h.advance(600)
            await say(h, cluster_id, VLLM_LINE)  # printed again: still said once
        assert await kinds(h, cluster_id) == [NoticeKind.SERVING]
        assert len(await h.notices(cluster_id, "is serving")) == 1
        assert asked(h) == []


async def test_serving_after_hours_of_virtual_time_counts_the_hour_marks(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id = await launched(h, readiness("sglang", limit=600))
        await h.advance(60)
        top = h.text_of(await h.top(cluster_id))
        assert "Not serving yet" in top and "The server is fired up" in top
        for _ in range(18):  # three hours of polls every 10 minutes: nothing yet
            await h.advance(600)
            await say(h, cluster_id, "Loading safetensors checkpoint shards: 42% Completed")
        assert await kinds(h, cluster_id) == []
        await h.advance(300)
        await say(h, cluster_id, "[2026-12-01] The server is fired up and ready to roll!")
        await h.advance(60)
        [serving] = await h.notices(cluster_id, "is serving")
        record = await h.record(cluster_id)
        # Ready at ~+60 s, serving at ~3 h 5 min later: marks at 0, 1, 2 and 3 h were billed.
        assert f"{4 * record.hourly_cents / 100:,.2f}" in h.text_of(serving)
        assert "4 hourly charges" in h.text_of(serving)
        assert "3h" in h.text_of(serving) or "3 h" in h.text_of(serving)


async def test_never_serving_asks_the_owner_once_with_both_buttons(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id = await launched(h, readiness(r"Uvicorn running on http://\S+"))
        await h.advance(60)
        await say(h, cluster_id, "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB")
        for _ in range(4):
            await h.advance(600)
        assert asked(h) == []  # 40 minutes: within the default 45
        for _ in range(6):
            await h.advance(600)
        [dm] = asked(h)
        text = h.text_of(dm)
        assert "CUDA out of memory" in text  # the last lines of rank 0
        assert Action.TERMINATE in text and Action.KEEP_WAITING in text
        record = await h.record(cluster_id)
        assert f"{record.hourly_cents / 100:,.2f}" in text  # one charge, at ready
        assert await kinds(h, cluster_id) == [NoticeKind.NOT_SERVING]

        await h.click(dm, Action.KEEP_WAITING, user=ALICE)
        assert "Waiting longer for" in h.text_of(h.slack.ephemerals(ALICE)[-1])
        await h.click(dm, Action.KEEP_WAITING, user=ALICE)  # the same prompt again
        assert "Already answered" in h.text_of(h.slack.ephemerals(ALICE)[-1])
        for _ in range(4):
            await h.advance(600)
        assert len(asked(h)) == 1  # the limit restarted at the press
        for _ in range(2):
            await h.advance(600)
        second = asked(h)
        assert len(second) == 2
        assert await kinds(h, cluster_id) == [NoticeKind.NOT_SERVING, NoticeKind.NOT_SERVING]

        await h.click(second[-1], Action.TERMINATE, user=ALICE)
        await h.advance(60)
        assert (await h.record(cluster_id)).status.value == "terminated"
        async with h.rt.db.transaction() as repos:
            watch = await repos.readiness.get(cluster_id)
        assert watch is not None and watch.state.value == "ended"


async def test_no_second_serving_across_a_restart(tmp_path, database_url):
    clock = ManualClock(START)
    async with EmbeddedSimulator(SimConfig.fast(), clock) as sim, fake_slack(clock) as slack:
        async with bot(tmp_path, slack=slack, sim=sim, database_url=database_url) as first:
            cluster_id = await launched(first, readiness("torchrun"))
            await first.advance(60)  # the simulator's rendezvous lines: serving
            assert len(await first.notices(cluster_id, "is serving")) == 1
        async with bot(tmp_path, slack=slack, sim=sim, database_url=database_url) as second:
            for _ in range(3):
                await second.advance(600)
            assert len(await second.notices(cluster_id, "is serving")) == 1
            assert await kinds(second, cluster_id) == [NoticeKind.SERVING]


async def test_cursor_survives_a_restart_and_the_line_after_it_is_said_once(tmp_path):
    clock = ManualClock(START)
    async with EmbeddedSimulator(SimConfig.fast(), clock) as sim, fake_slack(clock) as slack:
        async with bot(tmp_path, slack=slack, sim=sim) as first:
            cluster_id = await launched(first, readiness("vllm", limit=120))
            await first.advance(60)
            async with first.rt.db.transaction() as repos:
                watch = await repos.readiness.get(cluster_id)
            assert watch is not None and watch.cursors.get("0") is not None
        async with bot(tmp_path, slack=slack, sim=sim) as second:
            await second.advance(600)
            await say(second, cluster_id, VLLM_LINE)
            await second.advance(60)
            await second.advance(60)
            assert len(await second.notices(cluster_id, "is serving")) == 1


async def test_serving_on_a_degraded_cluster(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id = await launched(h, readiness("vllm"))
        await h.advance(60)
        await h.fail_node(cluster_id, rank=1)
        await h.advance(30)
        assert (await h.record(cluster_id)).status.value == "degraded"
        await say(h, cluster_id, VLLM_LINE)
        await h.advance(30)
        [serving] = await h.notices(cluster_id, "is serving")
        assert "degraded" in h.text_of(serving)


async def test_every_rank_must_print_it_when_asked(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id = await launched(h, readiness("vllm", all_ranks=True))
        await h.advance(60)
        await say(h, cluster_id, VLLM_LINE, rank=0)
        await h.advance(60)
        assert await kinds(h, cluster_id) == []
        await say(h, cluster_id, VLLM_LINE, rank=1)
        await h.advance(60)
        assert await kinds(h, cluster_id) == [NoticeKind.SERVING]


async def test_a_bad_pattern_is_a_field_error_and_nothing_is_stored(tmp_path):
    async with bot(tmp_path) as h:
        card = await h.quote("quote h100x8 nodes=2")
        await h.click(card, Action.QUOTE_REQUEST_LAUNCH, user=ALICE)
        modal = h.slack.last_view(ALICE)
        reply = await h.requests.submit_view(modal, user_id=ALICE, values={
            **readiness("Application (startup", limit="soon")})
        errors = reply.json["errors"]
        assert reply.json["response_action"] == "errors"
        assert "Application (startup" in errors[FIELD_READINESS]
        assert "soon" in errors[FIELD_READINESS_LIMIT]
        await h.rt.settle()
        assert h.cards() == [] and await h.requests_in_db() == []


def test_presets_cover_the_servers_and_the_orchestrators():
    assert PRESETS["vllm"][1] == "Application startup complete"
    assert PRESETS["sglang"][1] == "The server is fired up"
    assert {"torchrun", "slurm", "ray"} <= set(PRESETS)


async def test_orchestrator_quotes_launches_and_shows_the_roles(tmp_path):
    async with bot(tmp_path) as h:
        card = await h.quote("quote h100x8 nodes=2 orchestrator=slurm")
        assert "slurm" in h.text_of(card).lower()
        cluster_id = await launched(h, readiness("slurm"),
                                    text="quote h100x8 nodes=2 orchestrator=slurm")
        await h.advance(60)
        wire = await h.rt.provider.get_cluster(cluster_id)
        assert wire.orchestrator == "slurm"
        assert [n.role for n in wire.nodes] == ["slurm_controller", "slurm_compute"]
        await h.slash(f"status {cluster_id}")
        status = h.text_of(h.last_ephemeral(ALICE, containing="Nodes"))
        assert "Slurm controller" in status and "Slurm compute" in status


async def test_ray_roles_reach_the_connection_details(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id = await launched(h, {}, text="quote h100x8 nodes=3 orchestrator=ray")
        await h.advance(60)
        [details] = [m for m in h.slack.dms(ALICE) if "Primary node" in h.text_of(m)]
        text = h.text_of(details)
        assert "rank 0 (Ray head)" in text and "rank 2 (Ray worker)" in text
        assert cluster_id in text


async def test_a_bad_orchestrator_is_refused_privately(tmp_path):
    async with bot(tmp_path) as h:
        await h.slash("quote h100x8 nodes=2 orchestrator=kubernetes")
        answer = h.text_of(h.slack.ephemerals(ALICE)[-1])
        assert "orchestrator=kubernetes" in answer and "slurm" in answer
        assert h.cards() == []


async def test_the_billed_hours_chart_marks_the_hours_before_serving(tmp_path):
    """The receipt's chart (bot/services/clusters.py billed_hours): the hour marks from ready to
    the readiness line are *not serving*, the ones after it plain billed."""
    from bot.domain.hours import HourState
    from bot.domain.models import Actor

    async with bot(tmp_path) as h:
        cluster_id = await launched(h, readiness("vllm", limit=600))
        await h.advance(60)
        for _ in range(12):  # two hours without the line
            await h.advance(600)
        await say(h, cluster_id, VLLM_LINE)
        await h.advance(60)
        for _ in range(12):  # two more hours, serving
            await h.advance(600)
        await h.rt.services.termination.terminate(cluster_id=cluster_id,
                                                  actor=Actor(user_id=ALICE))
        await h.advance(60)
        _, marks = await h.rt.services.clusters.billed_hours(cluster_id=cluster_id)
        states = [state for _, state in marks]
        # Marks at 0, 1 and 2 h came before the line (at ~2 h 1 min); 3 and 4 h after it.
        assert states == [HourState.NOT_SERVING] * 3 + [HourState.BILLED] * 2, states


async def test_billed_while_waiting_leaves_out_marks_with_every_node_down(tmp_path):
    """Every node down across two hour marks while waiting: AI Reserve charged neither, so
    "getting there billed" is the ledger's one charge (it said three: $249.72-style)."""
    async with bot(tmp_path) as h:
        cluster_id = await launched(h, readiness("sglang", limit=600))
        await h.advance(60)
        await h.advance(600)
        for rank in (0, 1):
            await h.fail_node(cluster_id, rank=rank)
        for _ in range(13):  # 2 h 10 min: the marks at +1 h and +2 h pass uncharged
            await h.advance(600)
        await h.slash(f"recover {cluster_id}")
        await h.advance(60)
        await say(h, cluster_id, "[2026-12-01] The server is fired up and ready to roll!")
        await h.advance(60)
        [serving] = await h.notices(cluster_id, "is serving")
        charged = [e for e in h.sim.engine.ledger()
                   if e.resource_id == cluster_id and e.kind == "cluster_hour"]
        record = await h.record(cluster_id)
        assert len(charged) == 1 and record.accrued_hours == 1
        text = h.text_of(serving)
        assert f"*${record.hourly_cents / 100:,.2f}* (1 hourly charge of" in text, text
