"""Targets Slack refuses for good (issue 17, item 5): a deactivated owner, an archived approvals
channel. Each is tried once, recorded, and someone who can act is told — once."""

from datetime import timedelta

import pytest
import yaml

from bot.domain.models import RequestStatus
from bot.slack.ids import Action
from tests.e2e.harness import ALICE, APPROVALS, BOB, CAROL, DAVE, LEADS, bot

POLICY = yaml.safe_dump({
    "approvals_channel": APPROVALS,
    "approvers": {"users": [BOB], "group": LEADS},  # carol approves through the group
    "admins": [DAVE],
    "approval": {"auto_approve_below": 1.0, "one_approver_up_to": 100000.0},
})


def containing(messages, h, text):
    return [m for m in messages if text in h.text_of(m)]


def calls_reaching(h, user, since):
    """The Slack calls after `since` that tried to reach `user` by DM."""
    dm = h.slack.dm_channel(user)
    return [c for c in h.slack.calls[since:]
            if (c.method == "conversations.open" and c.args.get("users") == user)
            or (c.method == "chat.postMessage" and c.args.get("channel") in (dm, user))]


async def until(h, when):
    h.clock.set(when)
    await h.rt.services.watching.sync_live()
    await h.rt.settle()


async def test_a_deactivated_owner_is_tried_once_and_the_approvals_channel_and_admins_hear(
        tmp_path):
    async with bot(tmp_path, policy=POLICY) as h:
        cluster_id = await h.running_cluster()
        ready = h.sim.engine.get_cluster(cluster_id).ready_at
        h.slack.deactivated.add(ALICE)
        since = len(h.slack.calls)
        await until(h, ready + timedelta(hours=1))  # the hourly reminder DM is refused
        for _ in range(20):  # ten minutes of sweeps, then two more reminder hours
            await h.advance(30)
        await until(h, ready + timedelta(hours=2))
        await until(h, ready + timedelta(hours=3))
        attempts = calls_reaching(h, ALICE, since)
        assert 1 <= len(attempts) <= 2, [c.method for c in attempts]
        record = await h.record(cluster_id)
        [told] = containing(h.cards(), h, f"I can't reach <@{ALICE}>")
        text = h.text_of(told)
        assert cluster_id in text and "they are deactivated" in text  # not "they is"
        assert f"`{cluster_id}` (`{cluster_id}`)" not in text, text  # named once
        assert f"${record.hourly_cents / 100:,.2f}/h" in text and "accrued" in text
        [admin] = containing(h.slack.dms(DAVE), h, f"<@{ALICE}>")
        assert "user_disabled" in h.text_of(admin)
        async with h.rt.db.transaction() as repos:
            [broken] = await repos.outbox.undeliverable()
        assert (broken.target, broken.payload) == (ALICE, {"reason": "user_disabled"})
        h.slack.deactivated.discard(ALICE)  # reactivated: the next sweep finds her back
        await h.advance(60)
        async with h.rt.db.transaction() as repos:
            assert await repos.outbox.undeliverable() == []
        await until(h, ready + timedelta(hours=4))
        assert [m for m in h.slack.dms(ALICE) if Action.KEEP_RUNNING in h.text_of(m)]


async def test_any_dm_that_finds_an_owner_gone_tells_the_approvals_channel_of_their_clusters(
        tmp_path):
    async with bot(tmp_path, policy=POLICY) as h:
        cluster_id = await h.running_cluster()
        h.slack.deactivated.add(ALICE)
        await h.rt.notifier.tell(ALICE, "Anything at all.")  # not about the cluster
        await h.rt.settle()
        [told] = containing(h.cards(), h, f"I can't reach <@{ALICE}>")
        assert cluster_id in h.text_of(told)
        ready = h.sim.engine.get_cluster(cluster_id).ready_at
        await until(h, ready + timedelta(hours=1))  # its reminder: not said twice
        assert len(containing(h.cards(), h, f"I can't reach <@{ALICE}>")) == 1


async def submit_request(h, user=ALICE):
    """Quote, press Request launch, submit the form (no card is looked for)."""
    before = {r.id for r in await h.requests_in_db()}
    card = await h.quote("quote h100x8 nodes=2", user=user)
    await h.click(card, Action.QUOTE_REQUEST_LAUNCH, user=user)
    modal = h.slack.last_view(user)
    reply = await h.submit(modal, user=user)
    assert reply.status == 200 and not reply.body, reply.body
    [made] = [r for r in await h.requests_in_db() if r.id not in before]
    return made


def approval_cards(h, messages):
    return [m for m in messages if Action.APPROVE in h.text_of(m)]


async def test_an_archived_approvals_channel_sends_cards_by_dm_and_says_so(tmp_path):
    async with bot(tmp_path, policy=POLICY) as h:
        h.slack.archived.add(APPROVALS)
        request = await submit_request(h)
        assert request.status is RequestStatus.PENDING
        everything = "".join(h.text_of(m) for m in h.slack.all_messages())
        assert "Something went wrong" not in everything
        [truth] = containing(h.slack.dms(ALICE), h, f"`{request.id}` is stored")
        assert f"approvers were told by DM because <#{APPROVALS}> is archived" \
            in h.text_of(truth)
        for approver in (BOB, CAROL, DAVE):
            assert len(approval_cards(h, h.slack.dms(approver))) == 1, approver
        assert approval_cards(h, h.slack.dms(ALICE)) == []  # never asked to approve herself
        second = await submit_request(h)  # a second request: the admins are not told again
        [admin] = containing(h.slack.dms(DAVE), h, f"I can't post to <#{APPROVALS}>")
        assert "is_archived" in h.text_of(admin)
        assert h.slack.messages(APPROVALS) == []
        # The card's buttons work from the DM.
        [bobs] = containing(approval_cards(h, h.slack.dms(BOB)), h, request.id)
        await h.click(bobs, Action.APPROVE, user=BOB)
        decided = {r.id: r.status for r in await h.requests_in_db()}
        assert decided[request.id] in (RequestStatus.APPROVED, RequestStatus.LAUNCHING,
                                       RequestStatus.LAUNCHED)
        assert decided[second.id] is RequestStatus.PENDING
        posts = [c for c in h.slack.calls_to("chat.postMessage")
                 if c.args.get("channel") == APPROVALS]
        assert len(posts) == 1  # tried once, then known archived


@pytest.mark.parametrize(("broken", "said"), [("archived", "is archived"),
                                               ("removed_from", "no longer has the bot in it")])
async def test_the_pending_card_appears_once_when_the_channel_works_again(tmp_path, broken,
                                                                          said):
    async with bot(tmp_path, policy=POLICY) as h:
        getattr(h.slack, broken).add(APPROVALS)
        request = await submit_request(h)
        assert containing(h.slack.dms(ALICE), h, f"<#{APPROVALS}> {said}")
        await h.advance(60)
        assert h.cards() == []
        probes = len(h.slack.calls_to("conversations.info"))
        await h.advance(60)
        assert len(h.slack.calls_to("conversations.info")) == probes + 1  # one probe a sweep
        getattr(h.slack, broken).discard(APPROVALS)
        await h.advance(60)  # the next sweep probes the channel and posts what waited
        [card] = h.cards()
        assert request.id in h.text_of(card) and Action.APPROVE in h.text_of(card)
        for _ in range(3):
            await h.advance(60)
        assert len(h.cards()) == 1
        async with h.rt.db.transaction() as repos:
            assert await repos.outbox.undeliverable() == []
        await h.click(card, Action.APPROVE, user=BOB)
        [decided] = await h.requests_in_db()
        assert decided.status is not RequestStatus.PENDING
