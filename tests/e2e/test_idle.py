"""Idle rules, from the workload's own log: a done line or N quiet minutes on rank 0 (or every
rank) makes the owner get ONE DM — the last lines, what the idle time billed, what each further
hour costs, Terminate / Keep for N h — and the cluster message say "idle since …"; with the
policy's grace it is terminated before the next hour is charged unless kept, and the receipt
says why. All on the simulator's virtual clock."""

from datetime import timedelta

import yaml

from aireserve_sim.config import SimConfig
from aireserve_sim.embedded import EmbeddedSimulator
from bot.clock import ManualClock
from bot.domain.idle import IdleState
from bot.domain.watch import NoticeKind
from bot.slack.blocks.launch_modal import (
    FIELD_IDLE_ALL,
    FIELD_IDLE_DONE,
    FIELD_IDLE_MINUTES,
    FIELD_READINESS,
    IDLE_ALL_ON,
)
from bot.slack.ids import Action
from tests.e2e.harness import ALICE, APPROVALS, BOB, CAROL, START, bot, fake_slack
from tests.e2e.test_readiness import say


def policy(**idle):
    return yaml.safe_dump({"approvals_channel": APPROVALS,
                           "approvers": {"users": [BOB, CAROL]}, "idle": idle})


def idle(minutes=None, done=None, *, every_rank=False):
    values = {}
    if minutes is not None:
        values[FIELD_IDLE_MINUTES] = {FIELD_IDLE_MINUTES: str(minutes)}
    if done is not None:
        values[FIELD_IDLE_DONE] = {FIELD_IDLE_DONE: done}
    if every_rank:
        values[FIELD_IDLE_ALL] = {FIELD_IDLE_ALL: [IDLE_ALL_ON]}
    return values


async def launched(h, values):
    """Request with these launch-form values and approve; the new cluster's id."""
    before = {r.cluster_id for r in await h.requests_in_db()}
    card = await h.request(quote_text="quote h100x8 nodes=2", values=values)
    await h.click(card, Action.APPROVE, user=BOB)
    [cluster_id] = {r.cluster_id for r in await h.requests_in_db()} - before
    assert cluster_id is not None
    return cluster_id


def idle_dms(h, user=ALICE):
    return [m for m in h.slack.dms(user) if Action.KEEP_IDLE in h.text_of(m)
            and "looks idle" in h.text_of(m)]


async def watch_of(h, cluster_id):
    async with h.rt.db.transaction() as repos:
        return await repos.readiness.get(cluster_id)


async def idle_notices(h, cluster_id):
    async with h.rt.db.transaction() as repos:
        return [n for n in await repos.notices.for_cluster(cluster_id)
                if n.kind in (NoticeKind.IDLE, NoticeKind.IDLE_WARNING)]


async def test_training_completed_is_reported_once_and_terminated_before_the_next_hour(tmp_path):
    async with bot(tmp_path, policy=policy(terminate_after_minutes=15)) as h:
        cluster_id = await launched(h, idle(done="training"))
        await h.advance(60)
        record = await h.record(cluster_id)
        assert record.status.value == "running" and record.ready_at is not None
        for _ in range(2):
            await h.advance(600)
            await say(h, cluster_id, "step 1200/5000 loss=1.83")
        assert idle_dms(h) == []
        await say(h, cluster_id, "Training completed in 0:19:58; saved checkpoint-final")
        await h.advance(60)
        [dm] = idle_dms(h)
        text = h.text_of(dm)
        assert "Training completed" in text and "step 1200/5000" in text  # the last lines
        rate = f"${record.hourly_cents / 100:,.2f}"
        assert f"each further hour costs *{rate}*" in text
        assert "The idle time has billed *$0.00*" in text  # no hour mark since the line
        assert Action.TERMINATE in text and Action.KEEP_IDLE in text
        assert "terminates it at" in text
        assert "Idle since" in h.text_of(await h.top(cluster_id))
        for _ in range(6):  # the grace: 15 minutes, a warning in the thread before
            await h.advance(120)
            await say(h, cluster_id, "Training completed")  # printed again: still one DM
        await h.advance(120)
        [warning] = await h.notices(cluster_id, "will be terminated at")
        assert Action.KEEP_IDLE in h.text_of(warning)
        await h.advance(120)
        await h.advance(60)
        ended = await h.record(cluster_id)
        assert ended.status.value == "terminated"
        assert ended.terminated_at is not None
        assert ended.terminated_at < record.ready_at + timedelta(hours=1)
        assert ended.accrued_hours == 1  # the next hour was never charged
        assert len(idle_dms(h)) == 1
        assert [n.kind for n in await idle_notices(h, cluster_id)] == [
            NoticeKind.IDLE, NoticeKind.IDLE_WARNING]
        [receipt] = await h.notices(cluster_id, "Receipt")
        assert "it was idle and nobody kept it" in h.text_of(receipt)
        async with h.rt.db.transaction() as repos:
            rows = [r for r in await repos.audit.list(limit=500)
                    if r.action == "idle_terminate"]
            intent = await repos.terminations.get(cluster_id)
        assert len(rows) == 1 and rows[0].subject_id == cluster_id
        assert intent is not None and intent.requested_by == "idle-rule"
        assert (await watch_of(h, cluster_id)).idle_state is IdleState.ENDED


async def test_silent_rank_0_with_a_chatty_rank_1_follows_the_rule_chosen(tmp_path):
    async with bot(tmp_path) as h:
        rank0 = await launched(h, idle(minutes=20))
        every = await launched(h, idle(minutes=20, every_rank=True))
        await h.advance(60)
        for _ in range(12):  # 48 minutes: rank 1 prints every 4, rank 0 never
            await h.advance(240)
            for cluster_id in (rank0, every):
                await say(h, cluster_id, "epoch 3 batch 88 loss=0.41", rank=1)
        dms = idle_dms(h)
        assert len(dms) == 1 and rank0 in h.text_of(dms[0])
        assert "no new log line since" in h.text_of(dms[0])
        assert (await watch_of(h, rank0)).idle_state is IdleState.IDLE
        assert (await watch_of(h, every)).idle_state is IdleState.ACTIVE
        assert await idle_notices(h, every) == []
        # Without a grace in the policy nothing terminates it: the owner decides.
        assert (await h.record(rank0)).status.value == "running"


async def test_keep_for_n_hours_postpones(tmp_path):
    async with bot(tmp_path, policy=policy(terminate_after_minutes=10, keep_hours=1)) as h:
        cluster_id = await launched(h, idle(minutes=15))
        await h.advance(60)
        for _ in range(4):
            await h.advance(300)
        [dm] = idle_dms(h)
        assert "Keep for 1 h" in h.text_of(dm)
        await h.click(dm, Action.KEEP_IDLE, user=ALICE)
        assert "Keeping" in h.text_of(h.slack.ephemerals(ALICE)[-1])
        await h.click(dm, Action.KEEP_IDLE, user=ALICE)
        assert "Already answered" in h.text_of(h.slack.ephemerals(ALICE)[-1])
        assert "kept until" in h.text_of(await h.top(cluster_id))
        for _ in range(10):  # 50 minutes: past the grace, within the hour kept
            await h.advance(300)
        assert (await h.record(cluster_id)).status.value == "running"
        assert len(idle_dms(h)) == 1
        for _ in range(3):  # the hour kept is over and it is still silent: asked again
            await h.advance(300)
        assert len(idle_dms(h)) == 2
        watch = await watch_of(h, cluster_id)
        assert watch.idle_state is IdleState.IDLE and watch.idle_episode == 2
        async with h.rt.db.transaction() as repos:
            kept = [r for r in await repos.audit.list(limit=500)
                    if r.action == "keep_idle" and r.outcome == "ok"]
        assert len(kept) == 1 and kept[0].actor_id == ALICE


async def test_a_restart_does_not_dm_twice(tmp_path, database_url):
    clock = ManualClock(START)
    async with EmbeddedSimulator(SimConfig.fast(), clock) as sim, fake_slack(clock) as slack:
        async with bot(tmp_path, slack=slack, sim=sim, database_url=database_url,
                       policy=policy()) as first:
            cluster_id = await launched(first, idle(done="training"))
            await first.advance(60)
            await say(first, cluster_id, "Training completed")
            await first.advance(60)
            assert len(idle_dms(first)) == 1
        async with bot(tmp_path, slack=slack, sim=sim, database_url=database_url,
                       policy=policy()) as second:
            for _ in range(4):
                await second.advance(600)
            assert len(idle_dms(second)) == 1
            assert len(await idle_notices(second, cluster_id)) == 1


async def test_one_log_read_per_node_per_poll_for_readiness_and_idle(tmp_path):
    """Readiness and idleness share one follower: one cursor, one provider read per node."""
    async with bot(tmp_path) as h:
        cluster_id = await launched(h, {**idle(minutes=30, every_rank=True),
                                        FIELD_READINESS: {FIELD_READINESS: "no-such-line"}})
        await h.advance(60)
        calls = []
        provider = h.rt.services.watching.readiness._provider
        real = provider.cluster_logs

        async def counting(cid, **kw):
            calls.append((cid, kw["node"]))
            return await real(cid, **kw)

        provider.cluster_logs = counting
        try:
            await h.advance(60)
        finally:
            provider.cluster_logs = real
        assert sorted(calls) == [(cluster_id, 0), (cluster_id, 1)]



async def test_a_bad_idle_rule_is_refused_in_the_form_and_nothing_changes(tmp_path):
    async with bot(tmp_path) as h:
        card = await h.quote("quote h100x8 nodes=2")
        await h.click(card, Action.QUOTE_REQUEST_LAUNCH, user=ALICE)
        modal = h.slack.last_view(ALICE)
        for values, field, words in (
                (idle(minutes=4), FIELD_IDLE_MINUTES, "5 to 1440"),
                (idle(minutes=1441, done="training"), FIELD_IDLE_MINUTES, "5 to 1440"),
                (idle(done="Training (completed"), FIELD_IDLE_DONE, "not a valid pattern"),
                (idle(minutes=30, done=r"(step \d+) \1"), FIELD_IDLE_DONE, "super-linear")):
            reply = await h.requests.submit_view(modal, user_id=ALICE, values=values)
            assert reply.json["response_action"] == "errors", values
            assert set(reply.json["errors"]) == {field}, reply.json
            assert words in reply.json["errors"][field]
        await h.rt.settle()
        assert h.cards() == [] and await h.requests_in_db() == []


async def test_the_policy_prefills_the_form(tmp_path):
    async with bot(tmp_path, policy=policy(after_minutes=45, done="slurm")) as h:
        card = await h.quote("quote h100x8 nodes=2")
        await h.click(card, Action.QUOTE_REQUEST_LAUNCH, user=ALICE)
        blocks = {b["block_id"]: b for b in h.slack.last_view(ALICE)["blocks"]}
        assert blocks[FIELD_IDLE_MINUTES]["element"]["initial_value"] == "45"
        assert "_job_complete" in blocks[FIELD_IDLE_DONE]["element"]["initial_value"]


async def test_a_terminate_decided_before_a_crash_is_made_after_the_restart(tmp_path):
    """The grace ran out and the rule moved to terminating, then the process died before the
    terminate intent: the next runtime on the same database makes it — once, with one audit
    row and the idle reason on the receipt."""
    clock = ManualClock(START)
    async with EmbeddedSimulator(SimConfig.fast(), clock) as sim, fake_slack(clock) as slack:
        async with bot(tmp_path, slack=slack, sim=sim,
                       policy=policy(terminate_after_minutes=5)) as first:
            cluster_id = await launched(first, idle(done="training"))
            await first.advance(60)
            await say(first, cluster_id, "Training completed")
            await first.advance(60)
            assert len(idle_dms(first)) == 1
            first.rt.services.watching.readiness.idle.terminate = None  # dies right after
            for _ in range(6):
                await first.advance(60)
            assert (await watch_of(first, cluster_id)).idle_state is IdleState.TERMINATING
            async with first.rt.db.transaction() as repos:
                assert await repos.terminations.get(cluster_id) is None
        async with bot(tmp_path, slack=slack, sim=sim,
                       policy=policy(terminate_after_minutes=5)) as second:
            for _ in range(3):
                await second.advance(60)
            assert (await second.record(cluster_id)).status.value == "terminated"
            async with second.rt.db.transaction() as repos:
                rows = [r for r in await repos.audit.list(limit=500)
                        if r.action == "idle_terminate"]
            assert len(rows) == 1
            [receipt] = await second.notices(cluster_id, "Receipt")
            assert "it was idle and nobody kept it" in second.text_of(receipt)
            assert len(idle_dms(second)) == 1


async def test_a_slow_match_never_delays_another_clusters_watch(tmp_path, monkeypatch):
    """Matching runs off the event loop with a time limit: a pattern stuck on one cluster's
    lines (RE2 can't be slow, so the stand-in blocks until released) costs that cluster its
    match for this poll and nobody else anything."""
    import threading
    import time

    from bot.services import readiness as follower

    release = threading.Event()
    real = follower.search

    def search(pattern, line):
        if pattern == "STUCK":
            release.wait(30)
        return real(pattern, line)

    monkeypatch.setattr(follower, "search", search)
    monkeypatch.setattr(follower, "MATCH_SECONDS", 0.5)
    try:
        async with bot(tmp_path) as h:
            stuck = await launched(h, idle(done="STUCK"))
            other = await launched(h, idle(done="training"))
            await h.advance(60)
            await say(h, stuck, "epoch 1 done")
            await say(h, other, "Training completed")
            started = time.monotonic()
            await h.advance(60)
            assert time.monotonic() - started < 10
            [dm] = idle_dms(h)
            assert other in h.text_of(dm)
            assert (await watch_of(h, stuck)).idle_state is IdleState.ACTIVE
    finally:
        release.set()
