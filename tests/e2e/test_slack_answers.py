"""Slack answers that aren't JSON (issue 24, item 2), at the process boundary: FakeSlack takes
the post and then answers it cut, as an HTML 502, as text/plain, empty, or not at all.

Every such answer goes through one error path (bot/slack/answers.py) that never raises its own
error, is counted in /metrics, and a post whose outcome is unknown is found in Slack (its
metadata carries the outbox key: bot/slack/maybe.py) — never posted twice, and nobody is told
"nothing more was changed" when something was."""

import pytest

from bot.jobs.sweeps import deliver_outbox
from bot.slack.ids import Action
from tests.e2e.harness import ALICE, APPROVALS, BOB, bot
from tests.e2e.test_metrics import scrape, value


async def _ask(h):
    """Quote and open the launch form; returns the form (submitting it posts the card)."""
    card = await h.quote()
    await h.click(card, Action.QUOTE_REQUEST_LAUNCH, user=ALICE)
    return h.slack.last_view(ALICE)


def _told(h, user):
    """Everything `user` was shown privately: ephemerals and DMs."""
    return "\n".join(h.text_of(m) for m in [*h.slack.ephemerals(user), *h.slack.dms(user)])


async def _approved_in_place(h):
    """One card, and Bob's Approve edits it: no second card, no second "approved" post."""
    assert len(h.cards()) == 1, [m.text for m in h.cards()]
    await h.click(h.cards()[0], Action.APPROVE, user=BOB)
    cards = h.cards()
    assert len(cards) == 1, [m.text for m in cards]
    assert cards[0].edits and "approved" in h.text_of(cards[0]).lower()
    assert len(h.sim.engine.list_clusters()) == 1


@pytest.mark.parametrize("answer", ["cut", "html", "plain", "empty"])
async def test_a_card_slack_took_but_answered_unreadably_is_kept_not_posted_again(tmp_path,
                                                                                 answer):
    async with bot(tmp_path) as h:
        form = await _ask(h)
        h.slack.fail_next("chat.postMessage", answer=answer, applied=True)
        reply = await h.submit(form)
        assert reply.status == 200 and not reply.body
        assert "Something went wrong" not in _told(h, ALICE)
        assert "nothing more was changed" not in _told(h, ALICE)
        assert len(h.progress()) == 1  # the requester's progress message went out too
        await deliver_outbox(h.rt.services)  # a delivery pass later: still one card
        await h.rt.settle()
        await _approved_in_place(h)
        m = await scrape(h)
        assert value(m, "clusterbot_slack_calls_total", method="chat.postMessage",
                     outcome="unreadable") == 1


async def test_a_post_whose_answer_never_came_is_found_after_the_timeout(tmp_path):
    async with bot(tmp_path, env={"SLACK_TIMEOUT_SECONDS": "0.5"}) as h:
        form = await _ask(h)
        h.slack.fail_next("chat.postMessage", answer="hang", applied=True)
        await h.submit(form)
        assert "Something went wrong" not in _told(h, ALICE)
        await _approved_in_place(h)
        m = await scrape(h)
        assert value(m, "clusterbot_slack_calls_total", method="chat.postMessage",
                     outcome="failed") == 1


async def test_when_slack_cant_be_asked_either_the_next_pass_looks_before_posting(tmp_path):
    async with bot(tmp_path) as h:
        form = await _ask(h)
        h.slack.fail_next("chat.postMessage", answer="cut", applied=True)
        h.slack.fail_next("conversations.history", answer="html")
        await h.submit(form)
        assert "Something went wrong" not in _told(h, ALICE)
        assert len(h.cards()) == 1
        await deliver_outbox(h.rt.services)  # looks for it (found), then edits it
        await h.rt.settle()
        assert len(h.slack.calls_to("conversations.history")) == 2
        await _approved_in_place(h)


async def test_an_unreadable_answer_to_a_post_slack_did_not_make_posts_it_once(tmp_path):
    async with bot(tmp_path) as h:
        form = await _ask(h)
        h.slack.fail_next("chat.postMessage", answer="html", status=502)  # not applied
        await h.submit(form)
        assert "Something went wrong" not in _told(h, ALICE)
        await deliver_outbox(h.rt.services)  # the queued card goes out now
        await h.rt.settle()
        await _approved_in_place(h)
        posted = [c for c in h.slack.calls_to("chat.postMessage")
                  if c.args.get("channel") == APPROVALS]
        assert len(posted) == 2  # the lost one, then the one that went out


async def test_every_post_for_an_outbox_key_carries_it_in_its_metadata(tmp_path):
    async with bot(tmp_path) as h:
        await h.request()
        card = h.cards()[0]
        assert card.extra["metadata"]["event_type"] == "clusterbot_post"
        assert card.extra["metadata"]["event_payload"]["key"].startswith("message/approval/")


def test_a_listener_failing_on_an_unknown_answer_never_says_nothing_changed():
    from bot.slack.answers import NoAnswer
    from bot.slack.errors import message_for

    said = message_for(NoAnswer("chat.postMessage", error="no_answer", status=None,
                                cause="TimeoutError", sent=True, args={})).as_kwargs()["text"]
    assert "nothing more was changed" not in said and "may have gone through" in said
