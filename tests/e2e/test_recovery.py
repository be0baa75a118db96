"""Recovery to the end of the seed: once every attempt of an episode is spent the cluster stays
degraded with `recovery_exhausted` and terminate is the way out (AI Reserve's docs; contract
§6). Every surface then offers terminate and only terminate and says why; old Recover and Turn
on auto-recovery buttons, `/cluster recover` and `/cluster autorecover` answer that truth and
call nothing at AI Reserve that would change it."""

import json

from bot.slack.ids import Action
from tests.e2e.harness import ALICE, BOB, bot

WHY = "Every recovery attempt of this episode of `{id}` is spent (3 of 3)"
WAY_OUT = "Terminating it is the way out: `/cluster terminate {id}`"


def counted(h, *methods):
    """Every call the bot makes to AI Reserve's recover and auto-recovery methods."""
    calls = []
    for method in methods:
        real = getattr(h.rt.provider, method)

        def call(*args, _real=real, _name=method, **kwargs):
            calls.append(_name)
            return _real(*args, **kwargs)

        setattr(h.rt.provider, method, call)
    return calls


async def refused(h, action):
    async with h.rt.db.transaction() as repos:
        return [e for e in await repos.audit.list(limit=500)
                if e.action == action and e.outcome == "refused"]


def said(h, user, containing):
    return [h.text_of(m) for m in [*h.slack.ephemerals(user), *h.slack.dms(user)]
            if containing in h.text_of(m)]


async def exhausted_cluster(h):
    """A running cluster whose node 1 can't come back: degraded, then three failed attempts —
    the first from the degraded notice's Recover button (so its claim remembers an answer)."""
    cluster_id, degraded = await h.degraded_cluster(recoverable=False)
    await h.click(degraded, Action.RECOVER, user=ALICE)
    await h.advance(30)
    for _ in range(2):
        await h.slash(f"recover {cluster_id}", user=ALICE)
        await h.advance(30)
    assert h.sim.engine.get_cluster(cluster_id).recovery.state.value == "exhausted"
    return cluster_id, degraded


async def test_after_exhaustion_every_surface_offers_terminate_only(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id, _ = await exhausted_cluster(h)
        [exhausted] = await h.notices(cluster_id, "recovery attempts are spent")
        buttons = [b.action_id for b in h.slack.find_buttons(exhausted)]
        assert buttons == [Action.TERMINATE]

        top = h.text_of(await h.top(cluster_id))
        assert "recovery is exhausted" in top and "Terminate is the way out" in top
        assert "/cluster recover" not in top and "makes one attempt" not in top
        assert [b.action_id for b in h.slack.find_buttons(await h.top(cluster_id))] == \
            [Action.TERMINATE]

        await h.requests.app_home_opened(ALICE)
        await h.rt.settle()
        home = json.dumps(h.slack.home(ALICE))
        assert "recovery is exhausted" in home and "terminate is the way out" in home
        assert "/cluster recover" not in home

        await h.slash(f"status {cluster_id}", user=ALICE)
        found = h.last_ephemeral(ALICE, containing="Nodes")
        status = found.text + json.dumps(found.blocks, ensure_ascii=False)
        assert "*3 of 3 attempts used*" in status and "*Exhausted*" in status
        assert "rank 0 · primary · *running*" in status
        assert "rank 1 · worker · *unhealthy*" in status
        assert "/cluster recover" not in status
        assert "*Auto-recovery*\\noff" in status


async def test_old_buttons_and_commands_after_exhaustion_answer_the_truth_and_call_nothing(
        tmp_path):
    async with bot(tmp_path) as h:
        cluster_id, degraded = await exhausted_cluster(h)
        why, way_out = WHY.format(id=cluster_id), WAY_OUT.format(id=cluster_id)
        calls = counted(h, "recover_cluster", "set_auto_recovery")

        # The notice's Recover was pressed before (its claim remembers "To try once more:
        # /cluster recover"): pressed again, it tells what is true now.
        await h.click(degraded, Action.RECOVER, user=ALICE)
        [answer] = said(h, ALICE, why)
        assert way_out in answer and "nothing was changed" in answer
        assert "To try once more" not in h.text_of(h.slack.ephemerals(ALICE)[-1])
        # Never pressed before: the old Turn on auto-recovery changes nothing either.
        await h.click(degraded, Action.AUTORECOVER_ON, user=BOB)
        [answer] = said(h, BOB, why)
        assert "Turning automatic recovery on would change nothing" in answer
        assert "next health pass" not in h.text_of(h.slack.ephemerals(BOB)[-1])

        await h.slash(f"recover {cluster_id}", user=ALICE)
        await h.slash(f"autorecover {cluster_id} on", user=BOB)
        await h.slash(f"autorecover {cluster_id} off", user=ALICE)
        assert len(said(h, ALICE, why)) == 3 and len(said(h, BOB, why)) == 2

        assert calls == []  # nothing asked of AI Reserve
        wire = h.sim.engine.get_cluster(cluster_id)
        assert wire.recovery.attempts_used == 3 and wire.recovery.auto is False
        assert not (await h.record(cluster_id)).auto_recovery
        assert len(await refused(h, "recover")) == 2
        assert len(await refused(h, "autorecover")) == 3

        await h.click(degraded, Action.TERMINATE, user=ALICE)  # the way out still works
        await h.advance(30)
        assert h.sim.engine.get_cluster(cluster_id).status.value == "terminated"


async def exhausted_unseen(h):
    """Every attempt spent at AI Reserve (its console) while the bot did not poll."""
    cluster_id = await h.running_cluster()
    await h.fail_for_good(cluster_id)
    for _ in range(3):
        h.sim.engine.recover(cluster_id)
        h.clock.advance(30)  # nobody polls
    assert (await h.record(cluster_id)).observed.recovery_state != "exhausted"
    return cluster_id


async def test_recover_when_the_bot_has_not_seen_the_exhaustion_yet(tmp_path):
    """AI Reserve answers 409 recovery_exhausted (attempts unchanged, as the contract says): the
    person hears the same why and the way out, and the record learns it."""
    async with bot(tmp_path) as h:
        cluster_id = await exhausted_unseen(h)
        calls = counted(h, "recover_cluster")
        await h.slash(f"recover {cluster_id}", user=ALICE)
        assert calls == ["recover_cluster"]  # asked, and refused by AI Reserve
        [answer] = said(h, ALICE, WHY.format(id=cluster_id))
        assert WAY_OUT.format(id=cluster_id) in answer
        assert h.sim.engine.get_cluster(cluster_id).recovery.attempts_used == 3
        assert (await h.record(cluster_id)).observed.recovery_state == "exhausted"
        assert "recovery is exhausted" in h.text_of(await h.top(cluster_id))


async def test_auto_recovery_is_read_fresh_before_it_is_set(tmp_path):
    """Turning auto-recovery on reads the cluster first (a GET changes nothing): spent since
    the last poll, it is refused without touching AI Reserve's setting."""
    async with bot(tmp_path) as h:
        cluster_id = await exhausted_unseen(h)
        calls = counted(h, "set_auto_recovery")
        await h.slash(f"autorecover {cluster_id} on", user=BOB)
        assert said(h, BOB, WHY.format(id=cluster_id)) and calls == []
        assert h.sim.engine.get_cluster(cluster_id).recovery.auto is False


async def test_auto_recovery_answers_what_ai_reserve_will_do(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id = await h.running_cluster()
        await h.slash(f"autorecover {cluster_id} on", user=ALICE)
        assert said(h, ALICE, "if a node is lost, AI Reserve restarts it")
        await h.slash(f"autorecover {cluster_id} off", user=ALICE)
        assert said(h, ALICE, "Automatic recovery is off")
        await h.fail_node(cluster_id)
        await h.advance(30)
        [degraded] = await h.notices(cluster_id, "is degraded")
        await h.click(degraded, Action.AUTORECOVER_ON, user=BOB)
        assert said(h, BOB, "AI Reserve tries at its next health pass (3 of 3 attempts left")
