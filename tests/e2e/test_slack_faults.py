"""Slack's 3-second rule under provider latency, and Slack's own 429s."""

from bot.slack.ids import Action
from tests.e2e.harness import APPROVALS, BOB, bot


async def test_commands_and_clicks_are_acked_at_once_however_slow_ai_reserve_is(tmp_path):
    async with bot(tmp_path) as h:
        await h.sim_admin("faults", {"route": "POST /v1/clusters/quote", "delaySeconds": 3.5,
                                     "count": 1})
        reply = await h.requests.slash(text="quote h100x8 nodes=2", user_id="U0ALICE",
                                       channel_id="C0GENERAL")
        assert reply.status == 200 and reply.elapsed < 1.0, reply
        await h.rt.settle()  # the quote card still arrives, after the ack
        card = h.last_ephemeral("U0ALICE", containing=Action.QUOTE_REQUEST_LAUNCH)

        await h.click(card, Action.QUOTE_REQUEST_LAUNCH, user="U0ALICE")
        await h.submit(h.slack.last_view("U0ALICE"))
        await h.sim_admin("faults", {"route": "POST /v1/clusters", "delaySeconds": 3.5,
                                     "count": 1})
        reply = await h.requests.click(h.cards()[-1], Action.APPROVE, user_id=BOB)
        assert reply.status == 200 and reply.elapsed < 1.0, reply
        await h.rt.settle()
        assert len(h.sim.engine.list_clusters()) == 1


async def test_slack_rate_limits_are_waited_out_and_nothing_is_posted_twice(tmp_path):
    async with bot(tmp_path) as h:
        h.slack.fail_next("chat.postMessage", error="ratelimited", status=429, retry_after=7,
                          count=2)
        await h.request()
        assert len(h.slack.messages(APPROVALS)) == 1
        assert len(h.progress()) == 1
        assert [round(s) for s in h.slept if s >= 7] and min(h.slept) >= 7
