"""Slack's own signals, acted on when Slack sends them (issue 24, item 3): `channel_archive` /
`channel_unarchive`, the bot's own `member_left_channel` / `member_joined_channel`,
`user_change`, and (single-token mode) `tokens_revoked`. Each arrives as Slack sends it: a signed
event callback to /slack/events; FakeSlack answers the Web API as the workspace now is.

An archived channel, or one the bot left, holds what is meant for it (kept, not "gone for
good"); given back, what waited goes out at once, exactly once. Rechecks of a broken target
are judged on the host's clock, not AI Reserve's."""

from __future__ import annotations

import logging
import time
from datetime import timedelta

import yaml

from aireserve_sim.config import SimConfig
from aireserve_sim.embedded import EmbeddedSimulator
from bot.clock import ManualClock
from bot.jobs.sweeps import deliver_outbox, watch_clusters
from bot.slack.ids import Action
from tests.e2e.harness import ALICE, APPROVALS, BOB, DAVE, GENERAL, START, bot, fake_slack
from tests.e2e.test_metrics import scrape, value
from tests.e2e.test_undeliverable import calls_reaching, containing, submit_request

POLICY = yaml.safe_dump({"approvals_channel": APPROVALS, "approvers": {"users": [BOB]},
                         "admins": [DAVE],
                         "approval": {"auto_approve_below": 1.0, "one_approver_up_to": 100000.0}})
log = logging.getLogger(__name__)


async def said(h, event):
    """Slack sends `event` (signed, in its envelope); the bot acks it with a 200."""
    reply = await h.requests.event(event)
    assert reply.status == 200, (event, reply.status, reply.body)
    await h.rt.settle()


async def records(h):
    async with h.rt.db.transaction() as repos:
        return {i.target: (i.payload or {}).get("reason")
                for i in await repos.outbox.undeliverable()}


async def pending(h):
    async with h.rt.db.transaction() as repos:
        return await repos.notices.pending(limit=100)


def posts_to(h, channel, since=0):
    return [c for c in h.slack.calls[since:]
            if c.method in ("chat.postMessage", "chat.update") and c.args.get("channel") == channel]


def found_cards(h):
    return [m for m in h.cards() if "Untracked cluster" in h.text_of(m)]


async def passes(h, count, seconds=30):
    for _ in range(count):
        h.clock.advance(seconds)
        await watch_clusters(h.rt.services)
        await deliver_outbox(h.rt.services)
        await h.rt.settle()


async def test_a_cluster_found_while_the_approvals_channel_was_archived_is_carded_on_unarchive(
        tmp_path):
    async with bot(tmp_path, policy=POLICY) as h:
        h.slack.archived.add(APPROVALS)
        await said(h, {"type": "channel_archive", "channel": APPROVALS, "user": DAVE})
        assert await records(h) == {APPROVALS: "is_archived"}  # at once, no call to Slack
        [admin] = containing(h.slack.dms(DAVE), h, f"I can't post to <#{APPROVALS}>")
        [found] = (await h.sim_admin("clusters/seed", {"count": 1}))["data"]
        h.clock.advance(120)  # booted
        await passes(h, 3)  # found, recorded; its card is held, the channel never tried
        assert posts_to(h, APPROVALS) == [] and found_cards(h) == []
        assert (await h.record(found)).owner_id is None
        held = "clusterbot_slack_unreachable_targets"  # the alert ClusterBotSlackChannelHeld
        assert value(await scrape(h), held, reason="is_archived") == 1

        h.slack.archived.discard(APPROVALS)
        started = time.perf_counter()
        await said(h, {"type": "channel_unarchive", "channel": APPROVALS, "user": DAVE})
        seconds = time.perf_counter() - started
        [card] = found_cards(h)  # at once: no clock moved, no probe, no hour mark
        assert found in h.text_of(card) and Action.CLAIM in h.text_of(card)
        await passes(h, 4)
        assert len(found_cards(h)) == 1 and await records(h) == {}
        assert value(await scrape(h), held, reason="is_archived") == 0
        await said(h, {"type": "channel_unarchive", "channel": APPROVALS, "user": DAVE})
        assert len(found_cards(h)) == 1  # said twice: still once
        assert len(containing(h.slack.dms(DAVE), h, f"<#{APPROVALS}>")) == 1  # told once
        log.warning("channel_unarchive → held found card posted in %.0f ms (1 held, 1 posted, "
                    "0 duplicated)", seconds * 1000)


async def test_the_bot_removed_from_a_channel_holds_its_notices_and_posts_them_once_back(
        tmp_path):
    async with bot(tmp_path, policy=POLICY) as h:
        cluster_id = await h.running_cluster()
        await said(h, {"type": "member_left_channel", "user": ALICE, "channel": GENERAL,
                       "channel_type": "C"})
        assert await records(h) == {}  # someone else left: the bot's reach is unchanged
        h.slack.removed_from.add(GENERAL)
        await said(h, {"type": "member_left_channel", "user": h.slack.bot_user_id,
                       "channel": GENERAL, "channel_type": "C"})
        assert await records(h) == {GENERAL: "not_in_channel"}
        before, since = len(await h.notices(cluster_id)), len(h.slack.calls)
        await h.fail_node(cluster_id)  # degraded: a notice for the cluster's thread
        await passes(h, 6)
        held = await pending(h)
        assert held and {n.cluster_id for n in held} == {cluster_id}  # kept, not delivered
        assert posts_to(h, GENERAL, since) == []  # and Slack was never tried

        h.slack.removed_from.discard(GENERAL)
        started = time.perf_counter()
        await said(h, {"type": "member_joined_channel", "user": h.slack.bot_user_id,
                       "channel": GENERAL, "channel_type": "C", "inviter": ALICE})
        seconds = time.perf_counter() - started
        assert await pending(h) == []
        told = (await h.notices(cluster_id))[before:]
        assert told and len(told) == len(held), [h.text_of(m)[:80] for m in told]
        await passes(h, 4)
        assert len((await h.notices(cluster_id))[before:]) == len(told)  # exactly once
        log.warning("member_joined_channel → %d held notices posted in %.0f ms (0 lost, "
                    "0 duplicated)", len(told), seconds * 1000)


async def test_a_deactivated_owner_is_known_at_once_and_reactivated_is_reached_again(tmp_path):
    async with bot(tmp_path, policy=POLICY) as h:
        cluster_id = await h.running_cluster()
        ready = h.sim.engine.get_cluster(cluster_id).ready_at
        await said(h, {"type": "user_change", "user": {"id": BOB, "deleted": False,
                                                       "profile": {"status_text": "lunch"}}})
        assert await records(h) == {}  # a profile edit: nothing to do
        h.slack.deactivated.add(ALICE)
        await said(h, {"type": "user_change", "user": {"id": ALICE, "deleted": True}})
        assert await records(h) == {ALICE: "user_disabled"}
        [told] = containing(h.cards(), h, f"I can't reach <@{ALICE}>")
        assert cluster_id in h.text_of(told) and "they are deactivated" in h.text_of(told)
        since = len(h.slack.calls)
        h.clock.set(ready + timedelta(hours=1))  # her reminder: not even tried
        await passes(h, 2)
        assert calls_reaching(h, ALICE, since) == []

        h.slack.deactivated.discard(ALICE)
        await said(h, {"type": "user_change", "user": {"id": ALICE, "deleted": False}})
        assert await records(h) == {}  # at once: not at the next probe
        h.clock.set(ready + timedelta(hours=2))
        await passes(h, 1)
        assert [m for m in h.slack.dms(ALICE) if Action.KEEP_RUNNING in h.text_of(m)]
        assert len(containing(h.cards(), h, f"I can't reach <@{ALICE}>")) == 1


async def test_a_revoked_bot_token_stops_the_calls_when_slack_says_so(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id = await h.running_cluster()
        await said(h, {"type": "tokens_revoked", "tokens": {"oauth": [ALICE]}})
        assert h.rt.slack.tokens.refused_count == 0  # a person's token: not the bot's
        await said(h, {"type": "tokens_revoked", "tokens": {"bot": [h.slack.bot_user_id]}})
        assert h.rt.slack.tokens.refused_count == 1
        since = len(h.slack.calls)
        await h.fail_node(cluster_id)
        h.clock.advance(10)
        await watch_clusters(h.rt.services)
        await deliver_outbox(h.rt.services)
        await h.rt.settle()
        assert h.slack.calls[since:] == [] and await pending(h)  # kept, nothing called


async def test_a_broken_channel_is_rechecked_on_the_hosts_clock(tmp_path):
    """AI Reserve's clock standing still (a paused VM, a simulator) must not stop the bot
    from probing an archived channel that Slack never said was unarchived."""
    provider_time, host = ManualClock(START), ManualClock(START)
    async with EmbeddedSimulator(SimConfig.fast(), provider_time) as sim, \
            fake_slack(host) as slack, bot(tmp_path, slack=slack, sim=sim, clock=host,
                                           policy=POLICY) as h:
        h.slack.archived.add(APPROVALS)
        request = await submit_request(h)
        assert h.cards() == []
        await h.advance(60)
        h.slack.archived.discard(APPROVALS)  # no event: only a probe can find it
        for _ in range(3):  # the host's minutes pass; AI Reserve's clock stands still
            await h.advance(60)
        [card] = h.cards()
        assert request.id in h.text_of(card)
