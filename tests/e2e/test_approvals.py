"""Who may decide, exactly-once launches, and every way a launch can be refused."""

import asyncio
import copy
import json

import sqlalchemy as sa

from bot.domain.models import RequestStatus
from bot.jobs import sweeps
from bot.slack.ids import Action
from storage.tables.requests import QuoteRow
from tests.e2e.harness import ALICE, APPROVALS, BOB, CAROL, GENERAL, bot


def has_buttons(message, action_id=Action.APPROVE):
    return action_id in json.dumps(message.blocks)


async def test_requester_cannot_approve_own_request(tmp_path):
    async with bot(tmp_path) as h:
        card = await h.request(user=BOB)  # Bob is an approver, but this is his own request
        await h.click(card, Action.APPROVE, user=BOB)
        assert "own launch request" in h.text_of(h.last_ephemeral(BOB, containing="own"))
        assert has_buttons(h.cards()[-1])
        assert h.sim.engine.list_clusters() == []
        [request] = await h.requests_in_db()
        assert request.status is RequestStatus.PENDING


async def test_non_approver_is_refused_and_nothing_changes(tmp_path):
    async with bot(tmp_path) as h:
        card = await h.request(user=ALICE)
        await h.click(card, Action.APPROVE, user="U0ALICE")  # the requester
        await h.click(card, Action.APPROVE, user="U0DAVE")  # not an approver
        await h.click(card, Action.REJECT, user="U0DAVE")
        assert has_buttons(h.cards()[-1])
        [request] = await h.requests_in_db()
        assert request.status is RequestStatus.PENDING and request.decided_by is None


async def test_twenty_concurrent_approvals_launch_exactly_once(tmp_path, database_url):
    # On PostgreSQL the twenty transactions really run at once (no SQLite write lock to queue
    # on): the compare-and-set and the locked request row have to keep it to one launch.
    async with bot(tmp_path, database_url=database_url) as h:
        card = copy.deepcopy(await h.request())  # what every approver's screen shows
        replies = await asyncio.gather(*(
            h.requests.click(card, Action.APPROVE, user_id=BOB if i % 2 else CAROL)
            for i in range(20)))
        await h.rt.settle()
        assert all(r.status == 200 and r.elapsed < 3 for r in replies)
        assert len(h.sim.engine.list_clusters()) == 1
        ledger_launches = {e.resource_id for e in h.sim.engine.ledger()}
        assert len(ledger_launches) <= 1
        [request] = await h.requests_in_db()
        assert request.status is RequestStatus.LAUNCHED
        async with h.rt.db.transaction() as repos:
            assert len(await repos.approvals.for_request(request.id)) == 1
        refusals = [m for u in (BOB, CAROL) for m in h.slack.ephemerals(u)
                    if "Already approved" in h.text_of(m)]
        assert len(refusals) == 19


async def test_a_slack_retry_of_the_same_click_changes_nothing(tmp_path):
    async with bot(tmp_path) as h:
        card = copy.deepcopy(await h.request())  # a screen that hasn't refreshed yet
        await h.click(card, Action.APPROVE, user=BOB)
        await h.click(card, Action.APPROVE, user=BOB)  # the same payload again
        await h.click(card, Action.REJECT, user=CAROL)  # too late
        assert len(h.sim.engine.list_clusters()) == 1
        [request] = await h.requests_in_db()
        assert request.status is RequestStatus.LAUNCHED and request.decided_by == BOB


async def test_rejection_is_recorded_and_shown(tmp_path):
    async with bot(tmp_path) as h:
        card = await h.request()
        await h.click(card, Action.REJECT, user=CAROL)
        assert not has_buttons(h.cards()[-1])
        assert "Rejected" in h.text_of(h.cards()[-1])
        assert "rejected" in h.text_of(h.progress(GENERAL)[-1]).lower()
        assert h.sim.engine.list_clusters() == []


async def test_expired_quote_is_repriced_and_needs_a_fresh_approval(tmp_path):
    async with bot(tmp_path) as h:
        old_card = copy.deepcopy(await h.request())
        h.clock.advance(16 * 60)  # quotes live 15 minutes
        await h.click(old_card, Action.APPROVE, user=BOB)
        assert h.sim.engine.list_clusters() == []
        assert "expired" in h.text_of(h.last_ephemeral(BOB, containing="expired"))
        cards = h.cards()
        assert len(cards) == 2 and not has_buttons(cards[0]) and has_buttons(cards[1])
        assert "unchanged" in h.text_of(cards[1]).lower() or "was" in h.text_of(cards[1])
        await h.click(old_card, Action.APPROVE, user=BOB)  # the old card can't launch
        assert h.sim.engine.list_clusters() == []
        await h.click(cards[1], Action.APPROVE, user=BOB)
        assert len(h.sim.engine.list_clusters()) == 1


async def test_an_expired_card_says_so_and_cannot_launch(tmp_path):
    async with bot(tmp_path) as h:
        card = copy.deepcopy(await h.request())
        h.clock.advance(16 * 60)
        await sweeps.watch_clusters(h.rt.services)
        await sweeps.watch_clusters(h.rt.services)  # once is enough: no second edit
        await h.rt.settle()
        shown = h.cards()[-1]
        assert "Quote expired" in h.text_of(shown) and len(shown.edits) == 1
        await h.click(card, Action.APPROVE, user=BOB)
        assert h.sim.engine.list_clusters() == []
        assert "expired" in h.text_of(h.last_ephemeral(BOB, containing="expired"))


async def test_price_changed_at_launch_asks_again_showing_old_and_new_price(tmp_path):
    async with bot(tmp_path) as h:
        card = await h.request()
        [request] = await h.requests_in_db()
        # The stored quote now disagrees with AI Reserve's (disk 100 → 500 GB): the launch
        # repeats it, AI Reserve answers 409 price_changed.
        async with h.rt.db.transaction() as repos:
            stored = (await repos.session.execute(  # the transaction's connection: rows, not ORM
                sa.select(QuoteRow.spec).where(QuoteRow.id == request.quote_id))).scalar_one()
            spec = dict(stored) | {"root_disk_gb": 500}
            await repos.session.execute(sa.update(QuoteRow).where(
                QuoteRow.id == request.quote_id).values(spec=spec))
        await h.click(card, Action.APPROVE, user=BOB)
        assert h.sim.engine.list_clusters() == []
        [request] = await h.requests_in_db()
        assert request.status is RequestStatus.PENDING
        assert request.previous_hourly_cents is not None
        assert request.hourly_cents > request.previous_hourly_cents
        new_card = h.cards()[-1]
        assert has_buttons(new_card) and not has_buttons(h.cards()[0])
        text = h.text_of(new_card)
        assert "was" in text and "now" in text
        await h.click(new_card, Action.APPROVE, user=CAROL)
        [cluster] = h.sim.engine.list_clusters()
        assert cluster.locked_rate.hourly_cents == request.hourly_cents


async def test_capacity_unavailable_keeps_the_request_for_a_retry(tmp_path):
    async with bot(tmp_path) as h:
        await h.approved_without_room()
        assert h.sim.engine.list_clusters() == []
        [request] = await h.requests_in_db()
        assert request.status is RequestStatus.LAUNCH_FAILED
        assert "place every node" in h.text_of(h.cards()[-1])
        assert any("place every node" in h.text_of(m) for m in h.slack.dms(ALICE))
        assert has_buttons(h.cards()[-1], Action.RETRY_LAUNCH)
        h.sim.engine.set_capacity(accelerator="h100-sxm-80gb", location="us-tx",
                                  placeable_nodes=8)
        await h.click(h.cards()[-1], Action.RETRY_LAUNCH, user=ALICE)
        assert len(h.sim.engine.list_clusters()) == 1
        assert h.cards()[-1].channel == APPROVALS


async def test_an_approved_launch_reaches_ai_reserve_while_slack_is_still_being_told(
        tmp_path, monkeypatch):
    """Issue 32: the approval showed itself in Slack first (the card, the progress message and
    its story, the approvers' homes: paced per channel, seconds on a busy bot) and only then
    started the launch — a real bot under load called AI Reserve 7 s after the click."""
    async with bot(tmp_path) as h:
        card = await h.request()
        entered, held = asyncio.Event(), asyncio.Event()
        refresh = h.rt.notifier.refresh_request

        async def slow_slack(request_id, **kwargs):
            if not entered.is_set():  # the approval's own refresh: Slack still being told
                entered.set()
                await held.wait()
            await refresh(request_id, **kwargs)

        monkeypatch.setattr(h.rt.notifier, "refresh_request", slow_slack)
        click = asyncio.create_task(h.requests.click(card, Action.APPROVE, user_id=BOB))
        try:
            await entered.wait()
            await h.rt.services.launching.drain()
            [request] = await h.requests_in_db()
            assert request.status is RequestStatus.LAUNCHED, request.status
            assert [c.id for c in h.sim.engine.list_clusters()] == [request.cluster_id]
        finally:
            held.set()
            await click
            await h.rt.settle()
        assert not has_buttons(h.cards()[-1])  # and Slack shows it, after


async def test_refreshes_asked_while_one_runs_fold_into_one_run_after_it(tmp_path, monkeypatch):
    """Issue 32: a launch asks its request's messages to be shown several times at once (the
    approval, the launch starting, the cluster linked, the watch sweep's SSH details); each
    refresh is ~6 paced Slack calls, and they queued one behind the other — on a busy bot the
    owner's SSH details waited 20 s behind four of them. Those asked while one runs wait for
    one more run, which reads the request after all of them were asked."""
    async with bot(tmp_path) as h:
        await h.request()
        [request] = await h.requests_in_db()
        notifier = h.rt.notifier
        runs, entered, held = [], asyncio.Event(), asyncio.Event()
        refresh = notifier._refresh_request

        async def counted(request_id, **kwargs):
            runs.append(kwargs["card"])
            if len(runs) == 1:
                entered.set()
                await held.wait()
            await refresh(request_id, **kwargs)

        monkeypatch.setattr(notifier, "_refresh_request", counted)
        first = asyncio.create_task(notifier.refresh_request(request.id))
        await entered.wait()
        asked = [asyncio.create_task(notifier.refresh_request(request.id)) for _ in range(3)]
        asked.append(asyncio.create_task(notifier.refresh_request(request.id, card=False)))
        await asyncio.sleep(0)  # they are asked while the first one runs
        held.set()
        await asyncio.gather(first, *asked)
        assert sorted(runs) == [False, True, True], runs  # 5 asked: the card's twice
