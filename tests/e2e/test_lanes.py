"""Nothing Slack refuses is dropped: a first post or an edit refused past the client's retries
is stored in the outbox and goes out on a later delivery pass — never given up — a Slack
error never escapes a sweep, and a launch never waits for Slack (issue 17, item 1)."""

from __future__ import annotations

import asyncio

from bot.jobs import sweeps
from bot.slack.ids import Action
from tests.e2e.harness import ALICE, APPROVALS, bot

# More 429s than the Web API client waits out in one call (bot/slack/retry.py: 5 retries).
PAST_THE_RETRIES = 8


def _told_wrong(h) -> list[str]:
    said = [h.text_of(m) for m in (*h.slack.ephemerals(ALICE), *h.slack.dms(ALICE))]
    return [t for t in said if "went wrong" in t.lower()]


async def test_an_approval_card_refused_past_the_retries_is_queued_and_posted_later(tmp_path):
    async with bot(tmp_path) as h:
        quote = await h.quote("quote h100x8 nodes=2")
        await h.click(quote, Action.QUOTE_REQUEST_LAUNCH, user=ALICE)
        h.slack.fail_next("chat.postMessage", error="ratelimited", retry_after=2,
                          count=PAST_THE_RETRIES)
        modal = h.slack.last_view(ALICE)
        assert modal is not None
        reply = await h.submit(modal, user=ALICE)

        assert reply.status == 200 and not reply.body, reply.body
        [request] = await h.requests_in_db()  # stored, pending: the requester isn't misled
        assert request.status.value == "pending"
        assert _told_wrong(h) == []
        assert h.cards() == []  # Slack still refuses: nothing shown yet …

        h.clock.advance(2)
        await h.rt.services.watching.deliver()  # … and a delivery pass shows it, once
        await h.rt.settle()
        [card] = h.cards()
        assert request.id in h.text_of(card) or Action.APPROVE in h.text_of(card)
        assert len(h.progress()) == 1
        await h.rt.services.watching.deliver()
        assert len(h.cards()) == 1


async def _failed_with_edits_refused(h) -> str:
    """A running cluster whose node just failed, while Slack refuses message edits past the
    retries; its id."""
    cluster_id = await h.running_cluster()
    await h.fail_node(cluster_id, rank=1)
    h.slack.fail_next("chat.update", error="ratelimited", retry_after=1, count=PAST_THE_RETRIES)
    return cluster_id


async def test_a_cluster_edit_refused_in_a_sweep_is_queued_not_raised_and_shows_later(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id = await _failed_with_edits_refused(h)
        h.clock.advance(30)
        # The job's sweep: stores the observation and queues the edit; Slack isn't called.
        await h.rt.services.watching.sync_live(deliver=False)
        assert "degraded" not in h.text_of(await h.top(cluster_id)).lower()
        await h.rt.services.watching.deliver()  # refused past the retries: kept
        h.clock.advance(5)
        await h.rt.services.watching.deliver()
        assert "degraded" in h.text_of(await h.top(cluster_id)).lower()
        [degraded] = await h.notices(cluster_id, "degraded")
        assert degraded.reply_broadcast


async def test_an_edit_refused_inline_is_queued_and_the_sweep_carries_on(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id = await _failed_with_edits_refused(h)
        await h.advance(30)  # inline edit refused past the retries: no SlackApiError here
        h.clock.advance(5)
        await h.rt.services.watching.deliver()
        assert "degraded" in h.text_of(await h.top(cluster_id)).lower()


async def test_an_untracked_clusters_card_refused_doesnt_crash_the_sweep(tmp_path):
    async with bot(tmp_path) as h:
        quote = await h.rt.provider.quote_cluster("a100-sxm-80gb", 8, 2)
        cluster = await h.rt.provider.launch_cluster(quote.id, idempotency_key="outside")
        # A 500 is never replayed blindly (it may have been posted): the post raises.
        h.slack.fail_next("chat.postMessage", error="internal_error", status=500, count=1)
        await sweeps.watch_clusters(h.rt.services)  # adopts it: no SlackApiError out of here
        await h.rt.settle()
        await sweeps.deliver_outbox(h.rt.services)  # the card refused: kept …
        await sweeps.deliver_outbox(h.rt.services)  # … and shown by the next pass
        card = await h.top(cluster.id)
        assert card.channel == APPROVALS and Action.CLAIM in h.text_of(card)
        assert len([m for m in h.slack.messages(APPROVALS) if cluster.id in h.text_of(m)]) == 1


async def test_the_launch_calls_ai_reserve_while_slack_is_still_being_told(tmp_path):
    """Money doesn't wait for Slack: once the launch's intent is stored, AI Reserve is called
    while the requester's messages are still going out (paced: seconds; in a storm, minutes),
    so the approved quote doesn't age behind Slack's rate limits."""
    async with bot(tmp_path) as h:
        card = await h.request()
        launching = h.rt.services.launching
        notifier = launching._notifier
        slack_free, launched = asyncio.Event(), asyncio.Event()
        real_launch = h.sim.engine.launch

        def launch(req):  # type: ignore[no-untyped-def]
            launched.set()
            return real_launch(req)

        class SlowSlack:  # the launch's own telling is held up (Slack pacing its calls)
            def __getattr__(self, name: str) -> object:
                return getattr(notifier, name)

            async def refresh_request(self, *args: object, **kwargs: object) -> None:
                await slack_free.wait()
                await notifier.refresh_request(*args, **kwargs)  # type: ignore[arg-type]

        h.sim.engine.launch = launch  # type: ignore[method-assign]
        launching._notifier = SlowSlack()  # type: ignore[assignment]
        await h.requests.click(card, Action.APPROVE, user_id="U0BOB")
        await asyncio.wait_for(launched.wait(), timeout=10)  # with Slack still held up
        slack_free.set()
        await h.rt.settle()
        [request] = await h.requests_in_db()
        assert request.status.value == "launched" and len(h.sim.engine.list_clusters()) == 1
