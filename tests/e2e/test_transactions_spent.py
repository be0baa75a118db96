"""What the product's everyday work costs in database transactions (issue 32: the suite is bound by
CPU, and on SQLite each transaction is a checkout, BEGIN IMMEDIATE and COMMIT on aiosqlite's
thread, ~0.9 ms before any statement). Counted, not timed: each count is the one a cut brought
down, so a change that opens them again fails here and says where."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import AbstractAsyncContextManager, contextmanager

import pytest
import yaml

from bot.slack.blocks.common import notice
from bot.slack.ids import Action
from bot.slack.notifier import SlackNotifier
from storage.db import Database
from storage.repositories import Repos
from tests.e2e.harness import ALICE, APPROVALS, BOB, GENERAL, Harness, bot


def _notifier(h: Harness) -> SlackNotifier:
    notifier = h.rt.services.approvals._notifier  # the runtime's one SlackNotifier
    assert isinstance(notifier, SlackNotifier)
    return notifier


@contextmanager
def counted(db: Database, monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Transactions opened on `db` inside the block, by the function that opened them."""
    opened: Counter[str] = Counter()
    real = db.transaction

    def transaction() -> AbstractAsyncContextManager[Repos]:
        opened[sys._getframe(1).f_code.co_name] += 1
        return real()

    with monkeypatch.context() as m:
        m.setattr(db, "transaction", transaction)
        yield opened


async def test_a_post_spends_one_transaction_to_claim_and_one_to_mark_it(tmp_path, monkeypatch):
    """Whether an earlier attempt maybe posted it is read with the claim (bot/slack/maybe.py),
    not in a transaction of its own: 2 where it was 3."""
    async with bot(tmp_path) as h:
        outbox = _notifier(h).outbox
        with counted(h.rt.db, monkeypatch) as opened:
            await outbox.post_once("cheap/one", APPROVALS, notice("posted once"))
        assert sum(opened.values()) == 2, opened
        assert any(m.text == "posted once" for m in h.slack.messages(APPROVALS))
        with counted(h.rt.db, monkeypatch) as opened:  # again: found done, nothing posted
            await outbox.post_once("cheap/one", APPROVALS, notice("posted once"))
        assert sum(opened.values()) == 1, opened
        assert [m.text for m in h.slack.messages(APPROVALS)].count("posted once") == 1


async def test_a_dm_reads_the_dm_channel_once_a_process(tmp_path, monkeypatch):
    """The person's DM channel is opened once and stored (never changed): a process reads it
    once (bot/slack/outbox.py `dm_channel`), then a DM is its claim and its mark, 2 where it
    was 3."""
    async with bot(tmp_path) as h:
        outbox = _notifier(h).outbox
        await outbox.dm_once("cheap/dm/1", ALICE, notice("first"))
        with counted(h.rt.db, monkeypatch) as opened:
            await outbox.dm_once("cheap/dm/2", ALICE, notice("second"))
        assert opened == {"once": 2}, opened
        assert [m.text for m in h.slack.dms(ALICE)][-2:] == ["first", "second"]
        opens = [c for c in h.slack.calls if c.method == "conversations.open"
                 and c.args.get("users") == ALICE]
        assert len(opens) == 1, opens


async def test_a_refresh_reads_its_card_progress_and_story_in_one_transaction(tmp_path,
                                                                             monkeypatch):
    """The card's key, the progress message, the untold steps of the story and what each
    upsert reads first (its channel refused? its coordinates) are read with the request
    (bot/slack/notifier.py): one transaction where five were (`_card_key`, `_tell_story` and
    each `upsert` had their own), besides one per Home published."""
    async with bot(tmp_path) as h:
        cluster_id = await h.running_cluster()
        [request] = await h.requests_in_db()
        top = await h.top(cluster_id)
        told = len(h.slack.thread(top.channel, top.ts))
        with counted(h.rt.db, monkeypatch) as opened:
            await _notifier(h).refresh_request(request.id)
        # The refresh's reads (the card and the progress message are edited on them), and no
        # Home's: nothing a Home shows of the request changed since its last publish
        # (bot/slack/audiences.py; the request is decided: approvers' Homes are not touched).
        assert opened == {"_refresh_request": 1}, opened
        assert len(h.slack.thread(top.channel, top.ts)) == told  # every step told already


SHARED = yaml.safe_dump({"approvals_channel": GENERAL, "approvers": {"users": [BOB]},
                         "approval": {"auto_approve_below": 0.0}})


async def test_a_card_refused_in_the_channel_it_shares_with_the_progress_message_is_seen_there(
        tmp_path, monkeypatch):
    """Read before the card was edited, "the channel is fine" is stale once Slack refuses the
    card there: the progress message in the same channel reads again and is not sent (one
    refused call, as when each upsert read for itself)."""
    async with bot(tmp_path, policy=SHARED) as h:
        await h.slash("quote h100x8 nodes=4", channel=GENERAL)
        quote = h.last_ephemeral(ALICE, containing=Action.QUOTE_REQUEST_LAUNCH)
        await h.click(quote, Action.QUOTE_REQUEST_LAUNCH, user=ALICE)
        modal = h.slack.last_view(ALICE)
        assert modal is not None
        assert (await h.submit(modal, user=ALICE)).status == 200
        [request] = await h.requests_in_db()
        assert len(h.slack.messages(GENERAL)) >= 2  # the card and the progress message
        h.slack.archived.add(GENERAL)  # not said by an event: found by the next edit
        since = len(h.slack.calls)
        with counted(h.rt.db, monkeypatch) as opened:
            await _notifier(h).refresh_request(request.id)
        tried = [c for c in h.slack.calls[since:] if c.args.get("channel") == GENERAL]
        assert [c.method for c in tried] == ["chat.update"], tried  # the card's, refused
        assert opened["upsert"] == 1, opened  # the progress message's upsert read again
        assert (await _notifier(h).outbox.unreachable()) == {GENERAL: "is_archived"}


async def test_a_digest_is_read_rendered_and_claimed_in_one_transaction(tmp_path, monkeypatch):
    """A storm's digest (bot/slack/digests.py): its clusters read, what it shows claimed and
    what its upsert reads first, in one transaction where three were; its first post is then
    claimed, and stored with its delivery (the upsert's two)."""
    async with bot(tmp_path) as h:
        cluster_id = await h.running_cluster()
        async with h.rt.db.transaction() as repos:
            digest = await repos.digests.open(GENERAL, now=h.clock.now())
            await repos.digests.join(digest.id, [cluster_id], now=h.clock.now())
        with counted(h.rt.db, monkeypatch) as opened:
            await _notifier(h).digests.refresh()
        # The open digests listed, then the one read with its claim; the upsert's claim of
        # the first post and its coordinates (nothing degraded any more: closed, nobody told).
        assert (opened["refresh"], opened["upsert"]) == (2, 2), opened
        [shown] = [m for m in h.slack.messages(GENERAL) if cluster_id in h.text_of(m)
                   and not m.is_reply and "Storm" in m.text]
        with counted(h.rt.db, monkeypatch) as opened:  # closed: nothing open to render
            await _notifier(h).digests.refresh()
        assert opened == {"refresh": 1}, opened


async def test_whether_a_notice_is_broadcast_is_read_with_its_claim(tmp_path, monkeypatch):
    """Whether a storm's digest speaks for the cluster (then its line stays in the thread) is
    read with the notice's claim (bot/slack/notices.py), not in a transaction before its post:
    the degraded line's post keeps only the one that stores its coordinates."""
    async with bot(tmp_path) as h:
        cluster_id = await h.running_cluster()
        await h.fail_node(cluster_id)
        with counted(h.rt.db, monkeypatch) as opened:
            await h.advance(30)
        assert opened["thread_post"] == 1, opened
        # Its channel is found with the read of what is pending (bot/slack/notices.py), not in
        # a transaction after it: `_route` is left only the look after the digests' gather.
        assert opened["_route"] == 1, opened
        [line] = await h.notices(cluster_id, "is degraded")
        assert [m for m in h.slack.messages(GENERAL) if m.is_reply] == [line]  # broadcast


async def test_a_clusters_refresh_goes_to_its_requests_without_reading_it_again(tmp_path,
                                                                               monkeypatch):
    """A cluster's request never changes once linked (storage/clusters.py): the notifier reads
    it once, then a cluster's refresh (every poll that moved it) is its request's refresh,
    without a transaction of its own to find the request."""
    async with bot(tmp_path) as h:
        cluster_id = await h.running_cluster()
        await _notifier(h).refresh_cluster(cluster_id)
        with counted(h.rt.db, monkeypatch) as opened:
            await _notifier(h).refresh_cluster(cluster_id)
        assert "_refresh_cluster" not in opened and opened["_refresh_request"] == 1, opened
        top = await h.top(cluster_id)
        assert cluster_id in h.text_of(top)  # its request's progress message, edited
