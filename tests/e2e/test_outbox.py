"""Several bots on one database in one process (in-process replicas: each its own Database,
notifier and claims; one FakeSlack, one simulator, one clock). Every replica polls and delivers
at once — no sweeps lease here — and still each notice, reminder, SSH DM and card is posted once:
the database claims alone hold. Also: a post Slack answers with a 5xx is not replayed by the Web
API client but by the outbox; DM channels are opened once per person."""

from __future__ import annotations

import asyncio
from collections import Counter

import sqlalchemy as sa

from bot.clock import ManualClock
from bot.slack.ids import Action
from bot.slack.notifier import SlackNotifier
from tests.e2e.harness import ALICE, APPROVALS, BOB, START, Harness, bot
from tests.e2e.harness import replicas as replicas_of

REPLICAS = 3


async def _together(replicas: list[Harness], seconds: float) -> None:
    """Time passes; every replica polls and delivers at the same moment."""
    replicas[0].clock.advance(seconds)
    await asyncio.gather(*(r.rt.services.watching.sync_live() for r in replicas))
    await asyncio.gather(*(r.rt.settle() for r in replicas))


def _notifier(h: Harness) -> SlackNotifier:
    notifier = h.rt.services.approvals._notifier  # the runtime's one SlackNotifier
    assert isinstance(notifier, SlackNotifier)
    return notifier


def _posted_twice(h: Harness) -> list[str]:
    accepted = Counter((c.response.get("channel"), c.args.get("thread_ts"), c.args.get("text"))
                       for c in h.slack.calls_to("chat.postMessage") if c.ok)
    return [f"{n}× {text}" for (_, _, text), n in accepted.items() if n > 1]


async def test_replicas_delivering_at_once_post_each_notice_once(tmp_path, database_url):
    async with replicas_of(tmp_path, REPLICAS, database_url=database_url) as replicas:
        sim, slack = replicas[0].sim, replicas[0].slack
        first = replicas[0]
        card = await first.request(quote_text="quote h100x8 nodes=2")
        await replicas[1].click(card, Action.APPROVE, user=BOB)
        for _ in range(2):
            await _together(replicas, 30)  # boots: the SSH details, once
        [cluster_id] = [c.id for c in sim.engine.list_clusters()]
        await first.fail_node(cluster_id)
        await _together(replicas, 30)
        [degraded] = await first.notices(cluster_id, "degraded")
        await replicas[2].click(degraded, Action.RECOVER, user=ALICE)
        for _ in range(4):
            await _together(replicas, 30)
        for _ in range(3):
            await _together(replicas, 3600)  # an accrued hour each: one reminder each

        assert _posted_twice(first) == []
        assert sum("ssh -p" in first.text_of(m) for m in slack.dms(ALICE)) == 1
        reminders = [m for m in slack.dms(ALICE) if Action.KEEP_RUNNING in first.text_of(m)]
        assert len(reminders) == 3
        assert len(await first.notices(cluster_id, "running again")) == 1
        assert len(slack.messages(APPROVALS)) == 1
        async with first.rt.db.transaction() as repos:
            assert await repos.notices.pending() == []
        # One conversations.open per person, whatever the number of DMs and replicas.
        opened = Counter(c.args.get("users") for c in slack.calls_to("conversations.open"))
        assert opened[ALICE] == 1


async def test_a_deleted_card_is_posted_again_once_by_racing_replicas(tmp_path, database_url):
    async with replicas_of(tmp_path, REPLICAS, database_url=database_url) as replicas:
        slack = replicas[0].slack
        card = await replicas[0].request()
        card.deleted = True  # someone deleted it in Slack
        [request] = await replicas[0].requests_in_db()
        await asyncio.gather(*(_notifier(r).refresh_request(request.id)
                               for r in replicas))
        assert len(slack.messages(APPROVALS)) == 1  # one new card, not three
        posted = [c for c in slack.calls_to("chat.postMessage")
                  if c.ok and c.response.get("channel") == APPROVALS]
        assert len(posted) == 2  # the deleted one and its successor


async def test_a_post_answered_500_is_not_replayed_by_the_client_but_by_the_outbox(tmp_path):
    async with bot(tmp_path) as h:
        card = await h.request(quote_text="quote h100x8 nodes=2")
        await h.click(card, Action.APPROVE, user=BOB)
        # Running: the thread's "Ready" post, then the SSH details DM, each meet a 500.
        h.slack.fail_next("chat.postMessage", error="internal_error", status=500, count=2)
        await h.advance(60)
        refused = [c for c in h.slack.calls_to("chat.postMessage") if c.status == 500]
        assert len(refused) == 2  # the Web API client sent neither again
        assert not any("ssh -p" in h.text_of(m) for m in h.slack.dms(ALICE))
        await h.advance(30)  # the next sweep: the details are read again and sent, once
        assert sum("ssh -p" in h.text_of(m) for m in h.slack.dms(ALICE)) == 1
        # The outbox row names the post, never its content: no SSH details in the database.
        async with h.rt.db.transaction() as repos:
            rows = (await repos.session.execute(sa.text(
                "SELECT key, kind, target, payload FROM outbox"))).all()
        assert ("connection/" in str(rows)) and "ssh -p" not in str(rows)


async def test_a_refused_dm_is_kept_and_posted_by_a_later_pass(tmp_path):
    async with bot(tmp_path) as h:
        notifier = _notifier(h)
        h.slack.fail_next("chat.postMessage", error="internal_error", status=500, count=1)
        await notifier.tell(ALICE, "Your cluster is ready.")
        assert h.slack.dms(ALICE) == []
        await notifier.tell(ALICE, "Your cluster is ready.")  # the same words: still once
        await notifier.deliver_notices()  # a delivery pass retries what is stored
        await notifier.deliver_notices()
        assert [m.text for m in h.slack.dms(ALICE)] == ["Your cluster is ready."]


async def test_a_dm_refused_again_and_again_is_never_given_up(tmp_path, caplog):
    async with bot(tmp_path) as h:
        notifier = _notifier(h)
        h.slack.fail_next("chat.postMessage", error="internal_error", status=500, count=20)
        await notifier.tell(ALICE, "Your cluster is ready.")
        for _ in range(25):
            await notifier.deliver_notices()
        refused = [c for c in h.slack.calls_to("chat.postMessage") if c.status == 500]
        assert len(refused) == 20  # each pass tried it again, until Slack took it: once
        assert [m.text for m in h.slack.dms(ALICE)] == ["Your cluster is ready."]
        assert "gave up" not in caplog.text


async def test_a_dm_flood_to_ten_owners_opens_each_dm_channel_once(tmp_path, database_url):
    """Ten owners, five DMs each, all at once from two replicas: conversations.open (Tier 3)
    is called at most once per owner — the channel id is kept in the database."""
    from bot.slack.blocks.common import notice
    from devslack.models import DEFAULT_USERS, SlackUser
    from devslack.webapi import FakeSlack

    owners = [f"U0OWNER{i}" for i in range(10)]
    users = (*DEFAULT_USERS, *(SlackUser(o, o.lower()) for o in owners))
    async with FakeSlack(clock=ManualClock(START), users=users,
                         channels={APPROVALS: "approvals"}) as slack, \
            replicas_of(tmp_path, 2, database_url=database_url, slack=slack) as replicas:
        await asyncio.gather(*(
            _notifier(replicas[n % 2]).outbox.dm_once(f"flood:{owner}:{n}", owner,
                                                       notice(f"notice {n} for {owner}"))
            for owner in owners for n in range(5)))
        opened = Counter(c.args.get("users") for c in slack.calls_to("conversations.open"))
        assert set(opened) == set(owners)
        assert max(opened.values()) == 1, opened
        assert all(len(slack.dms(owner)) == 5 for owner in owners)


async def test_progress_that_falls_back_to_a_dm_opens_the_dm_channel_once(tmp_path):
    """A request's channel Slack refuses (deleted: channel_not_found): its progress goes to the
    requester's DM, through the same cached DM channel as every other DM."""
    async with bot(tmp_path) as h:
        cards = [await h.quote("quote h100x8 nodes=2") for _ in range(2)]
        del h.slack.channels["C0GENERAL"]  # the channel both quotes were made in is gone
        for card in cards:
            await h.click(card, Action.QUOTE_REQUEST_LAUNCH, user=ALICE)
            await h.submit(h.slack.last_view(ALICE))
        progress = [m for m in h.slack.dms(ALICE) if "approval" in h.text_of(m).lower()]
        assert len(progress) == 2
        opened = [c for c in h.slack.calls_to("conversations.open") if c.ok]
        assert [c.args.get("users") for c in opened] == [ALICE]


async def test_a_private_answer_to_a_modal_goes_to_the_user_without_opening_a_dm(tmp_path):
    """A modal submission has no response_url: a refusal is posted to the user's id (Slack puts
    it in the App Home Messages tab) — no conversations.open for a one-off answer."""
    async with bot(tmp_path) as h:
        card = await h.quote()
        await h.click(card, Action.QUOTE_REQUEST_LAUNCH, user=ALICE)
        forged = {**h.slack.last_view(ALICE), "id": "V0GONE", "private_metadata": "stale"}
        reply = await h.submit(forged)
        assert reply.status == 200
        [answer] = h.slack.dms(ALICE)
        assert h.cards() == [] and h.text_of(answer)
        assert h.slack.calls_to("conversations.open") == []
