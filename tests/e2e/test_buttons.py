"""Every button acts once and only on the state it was shown.

For each kind of button: the very same signed payload delivered three times (a double click, a
proxy retry with X-Slack-Retry-Num) makes one effect — asserted on the effect itself (envelope
hours, recovery attempts, provider calls, approvals, audit rows) — and a stale copy pressed by
someone else changes nothing and says what already happened, by whom.
"""

import asyncio
import copy
from datetime import timedelta

from bot.domain.models import RequestStatus
from bot.slack.ids import Action
from devslack.requests import FORM, Reply
from tests.e2e.harness import ALICE, BOB, CAROL, DAVE, bot
from tests.e2e.test_policy import policy

TIMES = 3


async def deliver(h, surface, action_id, *, user, times=TIMES, apart=None, block_id=None):
    """Click once, then deliver that exact signed body `times` times: all at once, or one after
    the other `apart` seconds (of the bot's clock) apart. Returns the HTTP replies."""
    bodies = []

    async def capture(body, *, content_type, extra=None):
        bodies.append(body)
        return Reply(200, "", "text/plain", 0.0)

    h.requests.send = capture
    try:
        await h.requests.click(surface, action_id, user_id=user, block_id=block_id)
    finally:
        del h.requests.send
    [body] = bodies

    def send(i):
        retry = {"X-Slack-Retry-Num": str(i), "X-Slack-Retry-Reason": "http_timeout"} if i else {}
        return h.requests.send(body, content_type=FORM, extra=retry)

    if apart is None:
        replies = await asyncio.gather(*(send(i) for i in range(times)))
    else:
        replies = []
        for i in range(times):
            replies.append(await send(i))
            await h.rt.settle()
            h.clock.advance(apart)
    await h.rt.settle()
    assert all(r.status == 200 for r in replies), replies
    return replies


def counted(h, method):
    """Count the calls the bot makes to one provider method."""
    calls = []
    real = getattr(h.rt.provider, method)

    async def call(*args, **kwargs):
        calls.append(args)
        return await real(*args, **kwargs)

    setattr(h.rt.provider, method, call)
    return calls


async def audit(h, action, outcome="ok"):
    async with h.rt.db.transaction() as repos:
        return [e for e in await repos.audit.list(limit=500)
                if e.action == action and e.outcome == outcome]


def told(h, user, text):
    return any(text in h.text_of(m) for m in [*h.slack.ephemerals(user), *h.slack.dms(user)])


def nothing_went_wrong(h):
    everything = "\n".join(h.text_of(m) for m in h.slack.all_messages())
    assert "Something went wrong" not in everything


async def at_envelope_end(h, cluster_id, hours):
    ready = h.sim.engine.get_cluster(cluster_id).ready_at
    h.clock.set(ready + timedelta(hours=hours))
    await h.rt.services.watching.sync_live()
    await h.rt.services.envelopes.sweep()
    await h.rt.settle()


def extend_dm(h, user):
    [dm] = [m for m in h.slack.dms(user) if Action.EXTEND in h.text_of(m)]
    return dm


ENVELOPE = {"accelerators": ["h100"], "max_nodes": 4, "max_lifetime_hours": 72}


async def test_extend_stale_dm_and_repeated_payload_extend_once(tmp_path, database_url):
    # The case: at 100 % Bob extends in his DM, then Carol presses Extend in hers.
    async with bot(tmp_path, policy=policy(limits=ENVELOPE), database_url=database_url) as h:
        cluster_id = await h.running_cluster()
        await at_envelope_end(h, cluster_id, 72)
        bob_dm, carol_dm = extend_dm(h, BOB), extend_dm(h, CAROL)
        await deliver(h, bob_dm, Action.EXTEND, user=BOB)
        assert (await h.record(cluster_id)).lifetime_hours == 144  # 72 + 72, not 288
        await h.click(carol_dm, Action.EXTEND, user=CAROL)
        record = await h.record(cluster_id)
        assert (record.lifetime_hours, record.extended_by) == (144, BOB)
        assert told(h, CAROL, f"Already extended by <@{BOB}> to 144 h")
        assert len(await audit(h, "extend")) == 1
        assert len(await audit(h, "extend", "refused")) == TIMES  # 2 repeats + Carol's
        extended = [m for m in await h.notices(cluster_id) if "extended the envelope" in
                    h.text_of(m)]
        assert len(extended) == 1
        # The envelope's next 100 % offers a fresh Extend, bound to 144 h: it works.
        await at_envelope_end(h, cluster_id, 144)
        fresh = [m for m in h.slack.dms(CAROL) if Action.EXTEND in h.text_of(m)][-1]
        await h.click(fresh, Action.EXTEND, user=CAROL)
        assert (await h.record(cluster_id)).lifetime_hours == 216
        nothing_went_wrong(h)


async def test_recover_repeated_and_stale_spend_one_attempt(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id, degraded = await h.degraded_cluster(recoverable=False)
        calls = counted(h, "recover_cluster")
        await deliver(h, degraded, Action.RECOVER, user=ALICE, apart=20)
        assert h.sim.engine.get_cluster(cluster_id).recovery.attempts_used == 1
        assert len(calls) == 1 and len(await audit(h, "recover")) == 1
        await h.click(degraded, Action.RECOVER, user=BOB)  # another person's copy
        assert told(h, BOB, f"Already asked by <@{ALICE}>")
        for _ in range(3):
            await h.advance(30)
        assert h.sim.engine.get_cluster(cluster_id).recovery.attempts_used == 1
        assert len(calls) == 1


async def test_recover_bound_to_the_attempt_count_it_was_shown(tmp_path):
    # An attempt made some other way (a command here) makes the notice's button stale.
    async with bot(tmp_path) as h:
        cluster_id, degraded = await h.degraded_cluster(recoverable=False)
        await h.slash(f"recover {cluster_id}", user=ALICE)
        for _ in range(3):
            await h.advance(30)
        await h.click(degraded, Action.RECOVER, user=BOB)
        assert told(h, BOB, "Since this button was shown, 1 of 3 recovery attempts")
        assert h.sim.engine.get_cluster(cluster_id).recovery.attempts_used == 1


async def test_auto_recovery_on_repeated_and_stale_calls_once(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id, degraded = await h.degraded_cluster()
        calls = counted(h, "set_auto_recovery")
        await deliver(h, degraded, Action.AUTORECOVER_ON, user=BOB)
        await h.click(degraded, Action.AUTORECOVER_ON, user=ALICE)
        assert told(h, ALICE, f"Already turned on by <@{BOB}>")
        assert len(calls) == 1 and len(await audit(h, "autorecover")) == 1


async def test_terminate_repeated_and_stale_call_the_provider_once(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id = await h.running_cluster()
        top = copy.deepcopy(await h.top(cluster_id))
        calls = counted(h, "terminate_cluster")
        await deliver(h, top, Action.TERMINATE, user=ALICE)
        await h.click(top, Action.TERMINATE, user=BOB)  # an approver's stale copy
        assert told(h, BOB, f"Already terminated by <@{ALICE}>")
        assert len(calls) == 1 and len(await audit(h, "terminate")) == 1
        await h.advance(60)
        assert h.sim.engine.get_cluster(cluster_id).status.value == "terminated"
        nothing_went_wrong(h)


async def test_approve_and_reject_repeated_and_stale_decide_once(tmp_path):
    async with bot(tmp_path) as h:
        card = copy.deepcopy(await h.request())
        await deliver(h, card, Action.APPROVE, user=BOB)
        await h.click(card, Action.REJECT, user=CAROL)  # her copy of the card, now stale
        assert told(h, CAROL, f"Already approved by <@{BOB}>")
        [request] = await h.requests_in_db()
        assert request.status is RequestStatus.LAUNCHED
        assert len(h.sim.engine.list_clusters()) == 1
        async with h.rt.db.transaction() as repos:
            assert len(await repos.approvals.for_request(request.id)) == 1
        assert len(await audit(h, "approve")) == 1

        second = copy.deepcopy(await h.request())
        await deliver(h, second, Action.REJECT, user=CAROL)
        await h.click(second, Action.APPROVE, user=BOB)
        assert told(h, BOB, f"Already rejected by <@{CAROL}>")
        assert len(h.sim.engine.list_clusters()) == 1
        assert len(await audit(h, "reject")) == 1


async def test_retry_repeated_and_stale_launch_once(tmp_path):
    async with bot(tmp_path) as h:
        await h.approved_without_room()
        failed = copy.deepcopy(h.cards()[-1])
        assert Action.RETRY_LAUNCH in h.text_of(failed)
        h.sim.engine.set_capacity(accelerator="h100-sxm-80gb", location="us-tx",
                                  placeable_nodes=8)
        launches = counted(h, "launch_cluster")
        await deliver(h, failed, Action.RETRY_LAUNCH, user=ALICE)
        await h.click(failed, Action.RETRY_LAUNCH, user=BOB)
        assert told(h, BOB, f"Already retried by <@{ALICE}>")
        assert len(h.sim.engine.list_clusters()) == 1
        assert len(launches) == 1 and len(await audit(h, "retry")) == 1


async def test_keep_running_repeated_and_stale_noted_once(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id = await h.running_cluster()
        reminder = await h.first_reminder(cluster_id)
        await deliver(h, reminder, Action.KEEP_RUNNING, user=ALICE)
        await h.click(reminder, Action.KEEP_RUNNING, user=BOB)
        assert told(h, BOB, f"Already noted by <@{ALICE}>")
        assert len(await audit(h, "keep_running")) == 1


async def test_claim_is_for_approvers_once_and_refusals_are_audited(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id = await h.adopted_cluster()
        card = copy.deepcopy(await h.top(cluster_id))
        await h.click(card, Action.CLAIM, user=DAVE)  # not an approver
        assert told(h, DAVE, "Only an approver can claim")
        assert (await h.record(cluster_id)).owner_id is None
        [refused] = await audit(h, "claim", "refused")
        assert refused.actor_id == DAVE and refused.subject_id == cluster_id
        await h.slash(f"logs {cluster_id}", user=DAVE)  # still nobody's: no logs for Dave
        assert told(h, DAVE, "Only the owner")

        await deliver(h, card, Action.CLAIM, user=BOB)
        await h.click(card, Action.CLAIM, user=CAROL)
        assert told(h, CAROL, f"Already claimed by <@{BOB}>")
        assert (await h.record(cluster_id)).owner_id == BOB
        assert len(await audit(h, "claim")) == 1


async def orphaned_volume(h):
    first = await h.running_cluster("quote h100x8 nodes=2 storage=1000")
    volume_id = h.sim.engine.get_cluster(first).volume.id
    await h.click(await h.top(first), Action.TERMINATE, user=ALICE)
    await h.advance(60)
    await h.rt.services.volumes.remind_due()
    h.clock.advance(24 * 3600)
    await h.rt.services.volumes.remind_due()
    [reminder] = [m for m in h.slack.dms(ALICE) if Action.DELETE_VOLUME in h.text_of(m)]
    return volume_id, reminder


async def test_keep_volume_repeated_and_stale_snooze_once(tmp_path):
    async with bot(tmp_path) as h:
        volume_id, reminder = await orphaned_volume(h)
        kept_at = h.clock.now()
        await deliver(h, reminder, Action.KEEP_VOLUME, user=ALICE, apart=3600)
        await h.click(reminder, Action.KEEP_VOLUME, user=BOB)
        assert told(h, BOB, f"Already kept by <@{ALICE}>")
        async with h.rt.db.transaction() as repos:
            volume = await repos.volumes.get(volume_id)
        assert volume.next_reminder_at == kept_at + timedelta(days=7)  # not pushed on
        assert len(await audit(h, "keep_volume")) == 1


async def test_delete_volume_repeated_and_stale_delete_once(tmp_path):
    async with bot(tmp_path) as h:
        volume_id, reminder = await orphaned_volume(h)
        calls = counted(h, "delete_volume")
        await deliver(h, reminder, Action.DELETE_VOLUME, user=ALICE)
        await h.click(reminder, Action.DELETE_VOLUME, user=BOB)
        assert told(h, BOB, f"Already deleted by <@{ALICE}>")
        assert h.sim.engine.get_volume(volume_id).status.value in ("deleting", "deleted")
        assert len(calls) == 1 and len(await audit(h, "delete_volume")) == 1


async def test_request_launch_and_discard_repeated_are_harmless(tmp_path):
    async with bot(tmp_path) as h:
        quote = await h.quote()
        await deliver(h, quote, Action.QUOTE_REQUEST_LAUNCH, user=ALICE)
        assert len(h.slack.calls_to("views.open")) == TIMES  # Slack honours the first only
        assert h.slack.last_view(ALICE) is not None
        await deliver(h, quote, Action.QUOTE_DISCARD, user=ALICE)
        assert await h.requests_in_db() == []
        nothing_went_wrong(h)
