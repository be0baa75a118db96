"""A bad item is one bad item: a cluster AI Reserve lists but the bot can't parse is skipped
(one log line: its id and the field), every other cluster is watched in the same sweep, the
skipped one keeps its last known figures (never "$0"), and after UNREADABLE_SWEEPS sweeps its
owner and the approvals channel hear it once per episode. A page that is not a page (truncated
JSON, a proxy's HTML 502) or an unknown status string crashes nothing either.

All through real HTTP: the simulator's `/_sim/faults` corrupts what it answers."""

from __future__ import annotations

import json
import logging

import pytest

from bot.services.unreadable import UNREADABLE_SWEEPS
from bot.slack.blocks.format import money
from devslack.models import Message
from tests.e2e.harness import ALICE, APPROVALS, BOB, Harness, bot

SWEEP = 30  # seconds between the watcher's polls in these tests


def strings(view: object) -> str:
    return json.dumps(view)


async def three_running(h: Harness) -> list[str]:
    ids = [await h.running_cluster() for _ in range(3)]
    await h.advance(3600)  # an hour accrued: there is a real figure to lose
    return ids


def unreadable_posts(messages: list[Message], h: Harness, cluster_id: str) -> list[Message]:
    return [m for m in messages if "can't read" in h.text_of(m) and cluster_id in h.text_of(m)]


def warnings_about(caplog: pytest.LogCaptureFixture, *words: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno >= logging.WARNING
            and all(w in r.getMessage() for w in words)]


async def sweep_logged(h: Harness, caplog: pytest.LogCaptureFixture) -> None:
    """One sweep, with only its warnings in `caplog`."""
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        await h.advance(SWEEP)


def assert_no_trace(caplog: pytest.LogCaptureFixture) -> None:
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR], \
        [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


async def one_bad_field(h: Harness, caplog: pytest.LogCaptureFixture, bad: str, other: str,
                        field: str, value: str) -> str:
    """`bad`'s `field` answered as `value` while `other` loses a node: the sweep warns once
    about `bad` (what it says is returned), with no trace."""
    await h.sim_admin("faults/items", {"clusterId": bad, "field": field, "value": value})
    await h.fail_node(other)
    await sweep_logged(h, caplog)
    lines = warnings_about(caplog, bad)
    assert len(lines) == 1, [r.getMessage() for r in lines]
    assert_no_trace(caplog)
    return lines[0].getMessage()


async def test_one_malformed_cluster_blinds_nothing_and_keeps_its_figures(tmp_path, caplog):
    async with bot(tmp_path) as h:
        bad, other, third = await three_running(h)
        known = await h.record(bad)
        assert known.accrued_cents > 0
        await h.sim_admin("faults/items", {"clusterId": bad, "field": "billing",
                                           "remove": True})
        await h.fail_node(other)
        await h.fail_node(third)

        await sweep_logged(h, caplog)
        # The others' notices arrive in the very sweep that skipped the bad one.
        assert len(await h.notices(other, "degraded")) == 1
        assert len(await h.notices(third, "degraded")) == 1
        # Its last known figures stay (a default Billing once made this $0) …
        assert (await h.record(bad)).accrued_cents == known.accrued_cents
        skipped = warnings_about(caplog, bad)
        assert len(skipped) == 1, [r.getMessage() for r in skipped]
        assert "billing" in skipped[0].getMessage()
        assert "lockedRate" not in skipped[0].getMessage()
        assert_no_trace(caplog)

        # … everywhere it is shown: never "$0".
        top = h.text_of(await h.top(bad))
        assert money(known.hourly_cents) in top and "$0.00" not in top  # running: its rate
        await h.slash("list", user=ALICE)
        listing = h.text_of(h.last_ephemeral(ALICE, containing=bad))
        assert "$0.00" not in listing
        await h.requests.app_home_opened(ALICE)
        await h.rt.settle()
        home = strings(h.slack.home(ALICE))
        assert "$0.00" not in home

        # Nobody is told until UNREADABLE_SWEEPS sweeps in a row could not read it …
        for _ in range(UNREADABLE_SWEEPS - 2):
            await h.advance(SWEEP)
        assert not unreadable_posts(h.slack.dms(ALICE), h, bad)
        await h.advance(SWEEP)
        # … then its owner and the approvals channel, once each, with the burn rate.
        dm = unreadable_posts(h.slack.dms(ALICE), h, bad)
        channel = unreadable_posts(h.slack.messages(APPROVALS), h, bad)
        assert len(dm) == 1 and len(channel) == 1
        said = h.text_of(channel[0])
        assert money(known.hourly_cents) in said and "may still be billing" in said.lower()
        assert "billing" in said  # the field that doesn't parse
        assert not unreadable_posts(h.slack.dms(BOB), h, bad)  # it has an owner: the owner
        for _ in range(4):
            await h.advance(SWEEP)
        assert len(unreadable_posts(h.slack.dms(ALICE), h, bad)) == 1  # once per episode
        assert len(unreadable_posts(h.slack.messages(APPROVALS), h, bad)) == 1
        assert (await h.record(bad)).accrued_cents == known.accrued_cents

        # It reads again: the episode ends with a line in its thread, and figures move on.
        await h.sim_admin("faults", {}, method="DELETE")
        await h.advance(SWEEP)
        assert len(await h.notices(bad, "reads again")) == 1
        record = await h.record(bad)
        assert record.observed is not None and record.observed.unreadable_sweeps == 0

        # A new episode is a new one: told again after as many sweeps.
        await h.sim_admin("faults/items", {"clusterId": bad, "field": "billing",
                                           "remove": True})
        for _ in range(UNREADABLE_SWEEPS):
            await h.advance(SWEEP)
        assert len(unreadable_posts(h.slack.dms(ALICE), h, bad)) == 2


async def test_a_wrong_type_in_one_field_is_one_line(tmp_path, caplog):
    async with bot(tmp_path) as h:
        bad, other, _ = await three_running(h)
        known = await h.record(bad)
        said = await one_bad_field(h, caplog, bad, other, "billing.accruedCents", "a lot")
        assert "billing.accruedCents" in said
        assert "a lot" not in said  # the field, never its value
        assert len(await h.notices(other, "degraded")) == 1
        assert (await h.record(bad)).accrued_cents == known.accrued_cents


async def test_an_unknown_status_is_read_and_the_state_kept(tmp_path, caplog):
    """Forward compatible: a status added after us parses (as "other"); the bot keeps the last
    state it knew and still follows the cluster's money."""
    async with bot(tmp_path) as h:
        bad, other, _ = await three_running(h)
        assert "doesn't know" in await one_bad_field(h, caplog, bad, other, "status",
                                                     "hibernating")
        assert (await h.record(bad)).status.value == "running"
        assert len(await h.notices(other, "degraded")) == 1
        for _ in range(UNREADABLE_SWEEPS + 1):
            await h.advance(SWEEP)
        assert not unreadable_posts(h.slack.messages(APPROVALS), h, bad)  # it is readable


@pytest.mark.parametrize("fault", [
    {"route": "GET /v1/clusters", "body": "truncated"},
    {"route": "GET /v1/clusters", "status": 502, "body": "html", "count": 10},
], ids=["truncated-json", "html-502"])
async def test_a_page_that_is_not_a_page_loses_nothing(tmp_path, caplog, fault):
    async with bot(tmp_path) as h:
        _, other, _ = await three_running(h)
        await h.sim_admin("faults", fault)
        await h.fail_node(other)
        caplog.clear()
        with caplog.at_level(logging.DEBUG):
            await h.advance(SWEEP)
        lines = [r for r in caplog.records if "listing clusters failed" in r.getMessage()]
        assert len(lines) == 1, [r.getMessage() for r in caplog.records]
        assert "<html" not in lines[0].getMessage()
        # A 502 is an outage: AI Reserve's reachability says it once, not each poll's listing.
        outage = fault.get("status") == 502
        assert (lines[0].levelno < logging.WARNING) == outage, lines[0].levelname
        assert_no_trace(caplog)
        # Nothing lost: the next sweep that reads the page says what happened meanwhile.
        await h.sim_admin("faults", {}, method="DELETE")
        await h.advance(SWEEP)
        assert len(await h.notices(other, "degraded")) == 1


async def test_a_cluster_whose_id_is_unreadable_is_counted_by_its_read_by_id(tmp_path, caplog):
    """The listing can't say which cluster a bad item is when its id is the bad field; the
    sweep then reads the missing one by id, gets the same bad answer, and counts it too."""
    async with bot(tmp_path) as h:
        bad, _, _ = await three_running(h)
        await h.sim_admin("faults/items", {"clusterId": bad, "field": "id", "value": 42})
        await sweep_logged(h, caplog)
        assert len(warnings_about(caplog, bad)) == 1  # the read by id; the listing had no id
        assert_no_trace(caplog)
        for _ in range(UNREADABLE_SWEEPS - 1):
            await h.advance(SWEEP)
        assert len(unreadable_posts(h.slack.messages(APPROVALS), h, bad)) == 1
        assert len(unreadable_posts(h.slack.dms(ALICE), h, bad)) == 1
