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

from bot.slack.blocks.common import notice
from bot.slack.notifier import SlackNotifier
from storage.db import Database
from storage.repositories import Repos
from tests.e2e.harness import APPROVALS, Harness, bot


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


async def test_a_refresh_reads_its_card_progress_and_story_in_one_transaction(tmp_path,
                                                                             monkeypatch):
    """The card's key, the progress message and the untold steps of the story are read with
    the request (bot/slack/notifier.py): one transaction where three were (`_card_key` and
    `_tell_story` had their own), besides one per message edited and per Home published."""
    async with bot(tmp_path) as h:
        cluster_id = await h.running_cluster()
        [request] = await h.requests_in_db()
        top = await h.top(cluster_id)
        told = len(h.slack.thread(top.channel, top.ts))
        with counted(h.rt.db, monkeypatch) as opened:
            await _notifier(h).refresh_request(request.id)
        # One each: the refresh's reads, the card's edit, the progress message's edit, the
        # requester's Home (the request is decided: the approvers' Homes are not touched).
        assert opened == {"_refresh_request": 1, "upsert": 2, "facts": 1}, opened
        assert len(h.slack.thread(top.channel, top.ts)) == told  # every step told already
