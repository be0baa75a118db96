"""Each delivery from Slack acts once, across replicas (bot/slack/once.py).

Slack retries an event it didn't see acked (same `event_id`, `X-Slack-Retry-Num` 1–3), maybe to
another replica; a retrying proxy resends a command byte for byte. The repeat is acked (Slack
stops retrying) and nothing else happens — asserted on the effect: Slack calls made, quotes
asked of AI Reserve, audit rows.
"""

import asyncio

import sqlalchemy as sa

from bot.domain.claims import EVENT, PAYLOAD, Delivery
from bot.domain.models import RequestStatus
from bot.jobs import sweeps
from bot.services.deliveries import KEEP
from bot.slack.ids import Action
from devslack.requests import Reply
from tests.e2e.harness import ALICE, bot
from tests.e2e.harness import replicas as replicas_of
from tests.e2e.test_extensions import planned, words
from tests.e2e.test_extensions import policy as extension_policy

HOME = {"type": "app_home_opened", "user": ALICE, "tab": "home"}


async def home_opened(h, event_id: str, retry_num: int | None = None) -> Reply:
    return await h.requests.event(HOME, event_id=event_id, retry_num=retry_num)


def published(h) -> int:
    return len(h.slack.calls_to("views.publish"))


async def test_an_event_delivered_three_times_publishes_home_once(tmp_path):
    async with bot(tmp_path) as h:
        replies = [await home_opened(h, "Ev0HOME1", retry) for retry in (None, 1, 2)]
        await h.rt.settle()
        assert [r.status for r in replies] == [200, 200, 200]
        assert published(h) == 1
        # A new event (another event_id) is not a repeat.
        await home_opened(h, "Ev0HOME2")
        await h.rt.settle()
        assert published(h) == 2


async def test_an_event_retried_to_two_replicas_acts_once(tmp_path, database_url):
    """Two bots on one database: Slack's first delivery and its retries race to both."""
    async with replicas_of(tmp_path, 2, database_url=database_url) as replicas:
        for n in range(3):  # three events, each delivered 4 times at once, alternately
            replies = await asyncio.gather(*(
                home_opened(replicas[i % 2], f"Ev0RACE{n}", i or None) for i in range(4)))
            await asyncio.gather(*(r.rt.settle() for r in replicas))
            assert [r.status for r in replies] == [200] * 4
            assert published(replicas[0]) == n + 1


async def test_an_event_retried_over_socket_mode_acts_once(tmp_path):
    async with bot(tmp_path, socket_mode=True) as h:
        replies = [await home_opened(h, "Ev0SOCKET", retry) for retry in (None, 1, 2, 3)]
        await h.rt.settle()
        assert [r.status for r in replies] == [200] * 4
        assert [e["retry_attempt"] for e in h.slack.socket.envelopes[-3:]] == [1, 2, 3]
        assert published(h) == 1


async def test_a_command_resent_by_a_retrying_proxy_quotes_once(tmp_path):
    async with bot(tmp_path) as h:
        calls = []
        real = h.rt.provider.quote_cluster

        async def quote_cluster(*args, **kwargs):
            calls.append(args)
            return await real(*args, **kwargs)

        h.rt.provider.quote_cluster = quote_cluster
        await h.slash("quote h100x8 nodes=2")
        for retry in (1, 2):
            reply = await h.requests.resend(retry_num=retry)
            await h.rt.settle()
            assert reply.status == 200
        quotes = [m for m in h.slack.ephemerals(ALICE)
                  if Action.QUOTE_REQUEST_LAUNCH in h.text_of(m)]
        assert len(calls) == 1 and len(quotes) == 1
        # The same command typed again is a new action (a new trigger_id): a new quote.
        await h.slash("quote h100x8 nodes=2")
        assert len(calls) == 2


async def test_a_withdraw_resent_by_a_retrying_proxy_acts_once(tmp_path, database_url):
    async with bot(tmp_path, database_url=database_url) as h:
        await h.request()
        [request] = await h.requests_in_db()
        await h.slash(f"withdraw {request.id}")
        await h.requests.resend(retry_num=1)
        await h.rt.settle()
        assert [r.status for r in await h.requests_in_db()] == [RequestStatus.WITHDRAWN]
        async with h.rt.db.transaction() as repos:
            withdraws = [e.outcome for e in await repos.audit.list(subject_id=request.id)
                         if e.action == "withdraw"]
        assert withdraws == ["ok"]  # not a second, refused, withdraw
        assert not any("Already withdrawn" in h.text_of(m) for m in h.slack.ephemerals(ALICE))


async def recorded(h, event_id: str) -> bool:
    async with h.rt.db.transaction() as repos:
        return await repos.claims.get(Delivery(kind=EVENT, id=event_id).key) is not None


async def test_deliveries_are_forgotten_after_a_day_by_the_sweep(tmp_path):
    async with bot(tmp_path) as h:
        await home_opened(h, "Ev0OLD")
        h.clock.advance(KEEP.total_seconds() - 60)
        await home_opened(h, "Ev0NEW")
        h.clock.advance(120)
        await sweeps.remind_volumes(h.rt.services)
        assert not await recorded(h, "Ev0OLD") and await recorded(h, "Ev0NEW")
        await h.rt.settle()
        before = published(h)
        await home_opened(h, "Ev0NEW", 1)  # still remembered: a repeat
        await h.rt.settle()
        assert published(h) == before
        h.clock.advance(KEEP.total_seconds())
        await sweeps.remind_volumes(h.rt.services)
        assert not await recorded(h, "Ev0NEW")



async def test_an_extend_preview_resent_by_a_retrying_proxy_is_shown_once(tmp_path):
    async with bot(tmp_path, policy=extension_policy()) as h:
        cluster_id = await planned(h)
        await h.slash(f"extend {cluster_id} 1")
        await h.requests.resend(retry_num=1)
        await h.rt.settle()
        previews = [m for m in h.slack.ephemerals(ALICE) if "+1 h ≈ $62.43" in words(m)]
        assert len(previews) == 1


async def test_a_command_acks_before_its_delivery_is_recorded_and_acts_after(tmp_path):
    """Issue 24.6: the INSERT recording a command's delivery stood between it and its ack, so in
    a burst the commands queued for the database while clicks (which record nothing) acked at
    once. Now the ack goes out while the write is held; the work waits for the write."""
    async with bot(tmp_path) as h:
        deliveries = h.rt.services.deliveries
        real_remember, real_first = deliveries.remember, deliveries.first
        real_quote = h.rt.provider.quote_cluster
        release = asyncio.Event()
        order: list[str] = []

        async def remember(delivery):
            await release.wait()  # the database is slow to take the write
            order.append("recorded")
            return await real_remember(delivery)

        async def first(delivery):
            order.append("checked")
            return await real_first(delivery)

        async def quote_cluster(*args, **kwargs):
            order.append("quoted")
            return await real_quote(*args, **kwargs)

        deliveries.remember, deliveries.first = remember, first
        h.rt.provider.quote_cluster = quote_cluster
        help_reply = await asyncio.wait_for(h.requests.slash(text="help", user_id=ALICE), 10)
        assert help_reply.status == 200 and "/cluster" in help_reply.body
        quote_reply = await asyncio.wait_for(
            h.requests.slash(text="quote h100x8 nodes=2", user_id=ALICE), 10)
        assert quote_reply.status == 200 and "Pricing" in quote_reply.body
        assert order == []  # acked, and nothing acted on: the writes are still held
        release.set()
        await h.rt.settle()
        assert order == ["recorded", "recorded", "quoted"]
        # Recorded all the same: a retrying proxy's resend of the quote is checked and dropped.
        await h.requests.resend(retry_num=1)
        await h.rt.settle()
        assert order == ["recorded", "recorded", "quoted", "checked"]
        assert len([m for m in h.slack.ephemerals(ALICE)
                    if Action.QUOTE_REQUEST_LAUNCH in h.text_of(m)]) == 1


async def test_deliveries_arriving_together_are_recorded_in_one_transaction(tmp_path):
    async with bot(tmp_path) as h:
        deliveries = h.rt.services.deliveries
        keys = [Delivery(kind=PAYLOAD, id=f"burst{n}") for n in range(20)]
        inserts: list[str] = []

        def seen(conn, cursor, statement, *args):
            if statement.lstrip().upper().startswith("INSERT INTO ACTION_CLAIMS"):
                inserts.append(statement)

        sa.event.listen(h.rt.db.engine.sync_engine, "before_cursor_execute", seen)
        try:
            await asyncio.gather(*(deliveries.remember(d) for d in [*keys, keys[0]]))
        finally:
            sa.event.remove(h.rt.db.engine.sync_engine, "before_cursor_execute", seen)
        assert len(inserts) == 1, inserts
        async with h.rt.db.transaction() as repos:
            assert all([await repos.claims.get(d.key) is not None for d in keys])
        # A retry of any of them is a repeat: dropped.
        assert not await deliveries.first(keys[3].model_copy(update={"retried": True}))
