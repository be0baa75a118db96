"""Wait for stock (bot/services/stock.py): a shape with no stock waits — re-quoted with back-off,
one quote per shape and place per round — and launches exactly once when the simulator's
capacity returns, never above the approved rate, never twice across a restart or with two
replicas; a higher rate asks the approvers again; Withdraw stops a wait; budgets count it."""

import asyncio
from datetime import timedelta

import sqlalchemy as sa

from aireserve_sim.config import SimConfig
from aireserve_sim.embedded import EmbeddedSimulator
from bot.clock import ManualClock
from bot.domain.models import RequestStatus
from bot.slack.blocks.launch_modal import FIELD_WAIT_HOURS
from bot.slack.ids import Action
from storage.tables.requests import RequestRow
from tests.e2e.harness import ALICE, BOB, GENERAL, START, bot, fake_slack, replicas
from tests.e2e.test_policy import policy

H100, PLACE = "h100-sxm-80gb", "us-tx"
SHAPE = f"quote h100x8 nodes=2 location={PLACE}"


def no_stock(h):
    h.sim.engine.set_capacity(accelerator=H100, location=PLACE, availability="none",
                              placeable_nodes=0)


def stock_back(h):
    h.sim.engine.set_capacity(accelerator=H100, location=PLACE, availability="high",
                              placeable_nodes=8)


async def one_waiting(h):
    """No stock, and one approved request waiting for it (as stored)."""
    no_stock(h)
    await wait_request(h)
    [request] = await h.requests_in_db()
    return request


async def wait_request(h, *, hours="12", user=ALICE, approve=True):
    """Quote a shape with no stock, press Wait for stock, ask for `hours`; Bob approves."""
    await h.slash(SHAPE, user=user)
    card = h.last_ephemeral(user, containing=Action.QUOTE_WAIT_FOR_STOCK)
    assert Action.QUOTE_REQUEST_LAUNCH not in h.text_of(card)  # no stock: no plain launch
    await h.click(card, Action.QUOTE_WAIT_FOR_STOCK, user=user)
    form = h.slack.last_view(user)
    assert form is not None and FIELD_WAIT_HOURS in str(form)
    reply = await h.submit(form, user=user,
                           values={FIELD_WAIT_HOURS: {FIELD_WAIT_HOURS: hours}})
    if approve:
        await h.click(h.cards()[-1], Action.APPROVE, user=BOB)
    return reply


async def sweep(h, seconds=0):
    h.clock.advance(seconds)
    calls = await h.rt.services.stock.sweep()
    await h.rt.settle()
    return calls


async def test_no_stock_waits_then_launches_once_at_the_approved_rate(tmp_path):
    async with bot(tmp_path) as h:
        request = await one_waiting(h)
        assert request.status is RequestStatus.WAITING
        assert request.wait_until == h.clock.now() + timedelta(hours=12)
        assert h.sim.engine.list_clusters() == []
        assert any("Waiting for it until" in h.text_of(m) for m in h.slack.dms(ALICE))
        approved_rate = request.hourly_cents
        # Backing off: a sweep before the next look re-quotes nothing.
        assert await sweep(h, 0) == 0
        assert await sweep(h, 61) == 1
        assert await sweep(h, 30) == 0  # the next look is 2 minutes later
        assert await sweep(h, 91) == 1
        assert h.sim.engine.list_clusters() == []
        stock_back(h)
        await sweep(h, 300)
        [cluster] = h.sim.engine.list_clusters()
        assert cluster.locked_rate.hourly_cents <= approved_rate
        [request] = await h.requests_in_db()
        assert request.status is RequestStatus.LAUNCHED and request.cluster_id == cluster.id
        assert any("Stock is back" in h.text_of(m) for m in h.slack.dms(ALICE))
        for _ in range(3):  # nothing more, however often it sweeps
            assert await sweep(h, 900) == 0
        assert len(h.sim.engine.list_clusters()) == 1


async def test_one_quote_a_round_serves_every_waiter_of_a_shape(tmp_path):
    async with bot(tmp_path) as h:
        no_stock(h)
        for _ in range(3):
            await wait_request(h)
        assert [r.status for r in await h.requests_in_db()] == [RequestStatus.WAITING] * 3
        assert await sweep(h, 61) == 1  # one quote for the three
        stock_back(h)
        await sweep(h, 900)
        assert len(h.sim.engine.list_clusters()) == 3
        assert {r.status for r in await h.requests_in_db()} == {RequestStatus.LAUNCHED}


async def test_a_higher_rate_asks_the_approvers_again(tmp_path):
    async with bot(tmp_path) as h:
        request = await one_waiting(h)
        # The market moved: what was approved is now 100 ¢/h below AI Reserve's rate.
        async with h.rt.db.transaction() as repos:
            await repos.session.execute(sa.update(RequestRow).where(
                RequestRow.id == request.id).values(hourly_cents=request.hourly_cents - 100))
        stock_back(h)
        await sweep(h, 61)
        assert h.sim.engine.list_clusters() == []  # never above the approved rate
        [asked] = await h.requests_in_db()
        assert asked.status is RequestStatus.PENDING
        assert asked.previous_hourly_cents == request.hourly_cents - 100
        assert asked.hourly_cents == request.hourly_cents
        assert any("above the approved" in h.text_of(m) for m in h.slack.dms(ALICE))
        await h.click(h.cards()[-1], Action.APPROVE, user=BOB)
        [cluster] = h.sim.engine.list_clusters()
        assert cluster.locked_rate.hourly_cents == asked.hourly_cents


async def test_withdraw_stops_the_wait(tmp_path):
    async with bot(tmp_path) as h:
        request = await one_waiting(h)
        await h.slash("waiting")
        listed = h.last_ephemeral(ALICE, containing="Waiting for stock (1)")
        assert request.id in h.text_of(listed)
        await h.click(listed, Action.WITHDRAW, user=ALICE)
        [request] = await h.requests_in_db()
        assert request.status is RequestStatus.WITHDRAWN
        stock_back(h)
        assert await sweep(h, 900) == 0
        assert h.sim.engine.list_clusters() == []


async def test_waiting_shows_in_list_and_home(tmp_path):
    async with bot(tmp_path) as h:
        request = await one_waiting(h)
        await h.slash("list")
        assert "1 request waiting for stock" in h.text_of(h.slack.ephemerals(ALICE)[-1])
        facts = await h.rt.services.home.facts(ALICE)
        assert [r.id for r, _ in facts.waiting] == [request.id]


async def test_a_home_reads_the_quotes_of_many_requests_in_one_statement(tmp_path):
    """Alice's Home lists her requests waiting for stock, an approver's every request pending
    on someone else, each with its quote: one SELECT of quotes for each list, not one per
    request (a Home is published after every submission and decision)."""
    async with bot(tmp_path) as h:
        no_stock(h)
        for _ in range(3):
            await wait_request(h)
        stock_back(h)
        for nodes in (2, 3, 4):
            await h.request(quote_text=f"quote h100x8 nodes={nodes}")
        reads: list[str] = []

        def seen(_conn, _cursor, statement, *_):
            if "FROM quotes" in statement:
                reads.append(statement)

        sync = h.rt.db.engine.sync_engine
        sa.event.listen(sync, "before_cursor_execute", seen)
        try:
            alice = await h.rt.services.home.facts(ALICE)
            bob = await h.rt.services.home.facts(BOB)
        finally:
            sa.event.remove(sync, "before_cursor_execute", seen)
        assert [(r.id, q.id) for r, q in alice.waiting] == [
            (r.id, r.quote_id) for r in await h.requests_in_db()
            if r.status is RequestStatus.WAITING]
        assert len(alice.waiting) == 3 and len(bob.pending) == 3
        assert [q.id for r, q in bob.pending] == [r.quote_id for r, _ in bob.pending]
        assert len(reads) == 2, reads  # Alice's waiting ones, Bob's pending ones


async def test_a_wait_that_ends_tells_the_requester(tmp_path):
    async with bot(tmp_path) as h:
        no_stock(h)
        await wait_request(h, hours="1")
        await sweep(h, 3601)
        [request] = await h.requests_in_db()
        assert request.status is RequestStatus.LAUNCH_FAILED
        assert any("wait for stock for your launch request" in h.text_of(m)
                   for m in h.slack.dms(ALICE))
        # A failed launch offers the wait again (the card's button, or /cluster wait).
        assert Action.WAIT_FOR_STOCK in h.text_of(h.cards()[-1])
        await h.click(h.cards()[-1], Action.WAIT_FOR_STOCK, user=ALICE)
        [request] = await h.requests_in_db()
        assert request.status is RequestStatus.WAITING
        stock_back(h)
        await sweep(h, 0)
        assert len(h.sim.engine.list_clusters()) == 1


async def test_a_wait_longer_than_the_policy_allows_is_refused(tmp_path):
    async with bot(tmp_path, policy=policy(limits={"max_stock_wait_hours": 24})) as h:
        no_stock(h)
        await h.slash(SHAPE)
        card = h.last_ephemeral(ALICE, containing=Action.QUOTE_WAIT_FOR_STOCK)
        await h.click(card, Action.QUOTE_WAIT_FOR_STOCK, user=ALICE)
        form = h.slack.last_view(ALICE)
        for bad, words in (("48", "at most 24 hours"), ("soon", "not a whole number"),
                           ("0", "at least 1 hour")):
            reply = await h.submit(form, values={FIELD_WAIT_HOURS: {FIELD_WAIT_HOURS: bad}})
            assert words in reply.json["errors"][FIELD_WAIT_HOURS], reply.body
            assert f"`{bad}`" in reply.json["errors"][FIELD_WAIT_HOURS]
        assert await h.requests_in_db() == []  # nothing changed
        # The command: a private answer naming the bad part; the failed launch stays as it was.
        await wait_request(h, hours="24", approve=False)
        [request] = await h.requests_in_db()
        async with h.rt.db.transaction() as repos:
            await repos.requests.update(request.id, now=h.clock.now(),
                                        status=RequestStatus.LAUNCH_FAILED)
        for bad in ("hours=25", "hours=-3", "hours=many"):
            await h.slash(f"wait {request.id} {bad}")
            text = h.text_of(h.slack.ephemerals(ALICE)[-1])
            assert f"`{bad.removeprefix('hours=')}`" in text, text
        [after] = await h.requests_in_db()
        assert after.status is RequestStatus.LAUNCH_FAILED and after.wait_until is None


async def test_budgets_hold_the_room_of_a_waiting_request(tmp_path):
    # $62.43/h × 14 accruals left in the month = $874.02 held by each request.
    async with bot(tmp_path, policy=policy(budgets={"users": {ALICE: 1000}})) as h:
        no_stock(h)
        await wait_request(h)
        [waiting] = await h.requests_in_db()
        assert waiting.status is RequestStatus.WAITING
        stock_back(h)
        await h.slash("quote h100x8 nodes=2 location=us-tx")
        card = h.last_ephemeral(ALICE, containing="budget")
        assert Action.QUOTE_REQUEST_LAUNCH not in h.text_of(card)  # refused: the wait holds it


async def test_launches_once_across_a_restart(tmp_path, database_url):
    clock = ManualClock(START)
    async with EmbeddedSimulator(SimConfig.fast(), clock) as sim, fake_slack(clock) as slack:
        async with bot(tmp_path, slack=slack, sim=sim, database_url=database_url) as first:
            no_stock(first)
            await wait_request(first)
            stock_back(first)
            # The bot stops right after the wait moved to approved, before any launch call.
            first.rt.services.launching.launch_soon = lambda request_id: None
            await sweep(first, 61)
            [request] = await first.requests_in_db()
            assert request.status is RequestStatus.APPROVED
            assert sim.engine.list_clusters() == []
        # A new runtime on the same database (the simulator outlives the bot).
        async with bot(tmp_path, slack=slack, sim=sim, database_url=database_url) as again:
            await again.rt.services.launching.resume(at_start=True)
            await again.rt.settle()
            await sweep(again, 900)
            await again.rt.services.launching.resume()
            await again.rt.settle()
            [cluster] = sim.engine.list_clusters()
            [request] = await again.requests_in_db()
            assert request.status is RequestStatus.LAUNCHED and request.cluster_id == cluster.id


async def test_two_replicas_on_one_database_launch_once(tmp_path, database_url):
    async with replicas(tmp_path, 2, database_url=database_url) as (a, b):
        no_stock(a)
        await wait_request(a)
        stock_back(a)
        a.clock.advance(61)
        calls = await asyncio.gather(a.rt.services.stock.sweep(), b.rt.services.stock.sweep())
        await a.rt.settle()
        await b.rt.settle()
        assert sum(calls) == 1  # one replica claimed the round
        await a.rt.services.launching.resume()
        await b.rt.services.launching.resume()
        await a.rt.settle()
        await b.rt.settle()
        [cluster] = a.sim.engine.list_clusters()
        [request] = await a.requests_in_db()
        assert request.status is RequestStatus.LAUNCHED and request.cluster_id == cluster.id
        assert request.channel_id == GENERAL


async def test_only_the_requester_and_only_a_capacity_failure_may_wait(tmp_path):
    async with bot(tmp_path) as h:
        await h.sim_admin("account", {"balanceCents": 0})
        card = await h.request(quote_text="quote h100x8 nodes=2")
        await h.click(card, Action.APPROVE, user=BOB)
        [request] = await h.requests_in_db()
        assert request.status is RequestStatus.LAUNCH_FAILED  # for payment, not stock
        assert Action.WAIT_FOR_STOCK not in h.text_of(h.cards()[-1])
        await h.slash(f"wait {request.id} hours=5")
        assert "waiting won't help" in h.text_of(h.slack.ephemerals(ALICE)[-1])
        await h.slash(f"wait {request.id} hours=5", user=BOB)
        assert "Only the requester" in h.text_of(h.slack.ephemerals(BOB)[-1])
        [after] = await h.requests_in_db()
        assert after.status is RequestStatus.LAUNCH_FAILED and after.wait_until is None


async def test_stock_for_many_waiters_is_shared_out_within_the_per_minute_allowance(tmp_path):
    async with bot(tmp_path) as h:
        no_stock(h)
        for _ in range(12):
            await wait_request(h)
        stock_back(h)
        # One sweep spends at most 10 quotes: the probe and 9 waiters' own quotes (and so at
        # most 10 launches, AI Reserve's launch limit a minute); the other 2 come next sweep.
        assert await sweep(h, 61) == 10
        assert len(h.sim.engine.list_clusters()) == 10
        assert await sweep(h, 60) == 2  # a probe, and the other waiter's own quote
        assert len(h.sim.engine.list_clusters()) == 12
        assert await sweep(h, 900) == 0
