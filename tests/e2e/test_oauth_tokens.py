"""Issue 29, item 3: every Web API call carries the token of the installation it is made for —
in a request, and outside any: the sweeps, the outbox's deliveries, DMs, App Home publishes.

Two workspaces installed through the OAuth flow. Each has its own people and channels (Slack's
ids are unique across Slack): Dave in #random is T0ONE's, Alice, Bob and Carol in #general and
#approvals are T0TWO's. A cluster is asked for, approved and watched in T0TWO; the watcher's
sweep (called from the test, outside any request, as the scheduler would) edits its message and
DMs its owner: each call with T0TWO's token, never T0ONE's, none refused.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

import pytest
from slack_sdk.errors import SlackApiError

from bot.clock import ManualClock
from bot.services.installations import REFRESH_RETRY
from bot.slack.tenancy import NotInstalled
from devslack.requests import SlackRequests
from devslack.webapi import FakeSlack
from tests.e2e.harness import ALICE, DAVE, SECRET, Harness, bot, fake_slack, replicas
from tests.e2e.test_metrics import scrape, value
from tests.e2e.test_oauth_install import ONE, TWO, install, oauth_bot, oauth_env

PSEUDO = ("ack", "response_url", "scheduled_message")  # not Web API calls: no token


async def test_sweeps_outbox_dms_and_homes_carry_their_installations_token(tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    async with oauth_bot(tmp_path) as h:
        await install(h, team=ONE)
        await install(h, team=TWO)
        tokens = {g.team_id: t for t, g in h.slack.oauth.tokens.items()}
        whose = {t: team for team, t in tokens.items()}
        first = len(h.slack.calls)

        async with SlackRequests(events_url=h.requests.events_url, signing_secret=SECRET,
                                 slack=h.slack, team_id=ONE) as dave:
            await dave.app_home_opened(DAVE)
            await dave.slash(text="quote h100x8 nodes=2", user_id=DAVE, channel_id="C0RANDOM")
        await h.rt.settle()
        ones = len(h.slack.calls)

        home, h.requests = h.requests, SlackRequests(
            events_url=h.requests.events_url, signing_secret=SECRET, slack=h.slack, team_id=TWO)
        async with h.requests:
            cluster_id = await h.running_cluster()  # its boot seen by a sweep, not a request
            swept = len(h.slack.calls)
            await h.first_reminder(cluster_id)  # a sweep's DM to the owner
        h.requests = home

        calls = [c for c in h.slack.calls[first:] if c.method not in PSEUDO
                 and c.method != "oauth.v2.access"]
        assert {whose.get(c.token) for c in h.slack.calls[first:ones]
                if c.method not in PSEUDO} == {ONE}
        assert {whose.get(c.token) for c in calls[ones - first:]} == {TWO}
        assert all(c.response.get("ok") for c in calls), [
            (c.method, c.response) for c in calls if not c.response.get("ok")]
        after_sweeps = {c.method for c in h.slack.calls[swept:] if c.method not in PSEUDO}
        assert {"chat.postMessage", "views.publish"} <= after_sweeps, after_sweeps
        assert h.slack.dms(ALICE) and h.slack.home(DAVE) is not None
        assert not [r for r in caplog.records if "no installation" in r.getMessage()]


async def test_an_uninstalled_workspace_is_called_no_more_and_keeps_its_data(tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    async with oauth_bot(tmp_path) as h:
        await install(h, team=ONE)
        await install(h, team=TWO)
        async with SlackRequests(events_url=h.requests.events_url, signing_secret=SECRET,
                                 slack=h.slack, team_id=ONE) as dave, SlackRequests(
                events_url=h.requests.events_url, signing_secret=SECRET, slack=h.slack,
                team_id=TWO) as alice:
            await dave.app_home_opened(DAVE)
            await alice.app_home_opened(ALICE)
            await h.rt.settle()
            assert (await dave.event({"type": "app_uninstalled"})).status == 200
            assert (await dave.event({"type": "app_uninstalled"})).status == 200  # said once
            await alice.event({"type": "tokens_revoked", "tokens": {"oauth": ["U0INSTALLER"]}})
            await h.rt.settle()
            before = len(h.slack.calls)
            with pytest.raises(NotInstalled, match="stopped"):  # a sweep's post, say
                await h.rt.slack.chat_postMessage(channel=DAVE, text="still there?")
            await dave.app_home_opened(DAVE)  # Dave's workspace: told to install again
            await h.rt.settle()
            assert [c.method for c in h.slack.calls[before:] if c.method not in PSEUDO] == []
            await alice.app_home_opened(ALICE)  # a person's token revoked: the bot goes on
            await h.rt.settle()
            assert [c.method for c in h.slack.calls[before:]] == ["views.publish"]

            await alice.event({"type": "tokens_revoked", "tokens": {"bot": ["UBOT"]}})
            with pytest.raises(NotInstalled, match="stopped"):
                await h.rt.slack.chat_postMessage(channel=ALICE, text="still there?")
        kept = {i.key: i for i in await h.rt.oauth.installations.all()}
        assert (kept[ONE].stopped_why, kept[TWO].stopped_why) == ("app_uninstalled",
                                                                  "tokens_revoked")
        assert kept[ONE].bot_token in h.slack.oauth.tokens  # kept, unused
        stopped = [r.getMessage() for r in caplog.records if "stopped (" in r.getMessage()]
        assert len(stopped) == 2, stopped


@asynccontextmanager
async def an_hour_from_expiry(tmp_path: Path, clock: ManualClock
                              ) -> AsyncIterator[tuple[FakeSlack, list[Harness], str]]:
    """Three replicas; tokens rotate (they last 12 hours, with a refresh token); T0ONE installed
    and Dave's App Home served by replica 1 (Dave is T0ONE's); then 11 hours on, an hour from
    expiry: within the refresh window. Yields Slack, the replicas and T0ONE's first token."""
    async with fake_slack(clock) as slack:
        slack.oauth.rotation = True
        async with replicas(tmp_path, 3, database_url=None, slack=slack,
                            env=oauth_env(slack)) as bots:
            await install(bots[0], team=ONE)
            [first] = slack.oauth.tokens
            async with SlackRequests(events_url=bots[1].requests.events_url,
                                     signing_secret=SECRET, slack=slack, team_id=ONE) as dave:
                await dave.app_home_opened(DAVE)
            await bots[1].rt.settle()
            clock.advance(11 * 3600)
            yield slack, bots, first


async def test_a_token_an_hour_from_expiry_is_refreshed_once_across_three_replicas(tmp_path):
    # slack_sdk dates a token's expiry from the wall clock (time() + expires_in): so does this
    # test's clock, from now on.
    clock = ManualClock(datetime.now(UTC).replace(microsecond=0))
    async with an_hour_from_expiry(tmp_path, clock) as (slack, bots, first):
        answers = await asyncio.gather(*(
            h.rt.slack.chat_postMessage(channel=DAVE, text=f"from replica {i}")
            for i, h in enumerate(bots)))
        assert all(a["ok"] for a in answers)
        assert slack.oauth.refreshed == 1  # one refresh, not one each
        clock.advance(3600)  # the first token has expired now
        assert slack.oauth.refusal(first) == "token_expired"
        again = await asyncio.gather(*(
            h.rt.slack.chat_postMessage(channel=DAVE, text="later") for h in bots))
        assert all(a["ok"] for a in again) and slack.oauth.refreshed == 1
        used = {c.token for c in slack.calls[-3:]}
        assert first not in used and len(used) == 1


async def test_a_refresh_that_fails_is_said_once_across_replicas_counted_and_alerted(
        tmp_path, caplog):
    """Slack refuses the refresh (invalid_refresh_token): one ERROR line for the three replicas,
    the failing gauge 1 on every replica, no replica tries again before REFRESH_RETRY, the
    token still used until it expires; once a refresh works, one WARNING and the gauge 0."""
    caplog.set_level(logging.INFO)
    clock = ManualClock(datetime.now(UTC).replace(microsecond=0))
    async with an_hour_from_expiry(tmp_path, clock) as (slack, bots, first):
        slack.oauth.refresh_refused = "invalid_refresh_token"

        async def post_from_each(times: int = 1) -> None:
            for _ in range(times):
                answers = await asyncio.gather(*(
                    h.rt.slack.chat_postMessage(channel=DAVE, text="hello") for h in bots))
                assert all(a["ok"] for a in answers)  # the old token: good till it expires

        def tried() -> int:
            return len([c for c in slack.calls if c.method == "oauth.v2.access"
                        and c.args.get("grant_type") == "refresh_token"])

        await post_from_each(3)
        assert tried() == 1  # one try, then no replica tries again for a while
        clock.advance(REFRESH_RETRY.total_seconds() + 1)
        await post_from_each()
        assert tried() == 2
        said = [r for r in caplog.records if "could not refresh" in r.getMessage()]
        assert [r.levelname for r in said] == ["ERROR"]  # once, for three replicas
        assert "invalid_refresh_token" in said[0].getMessage() and ONE in said[0].getMessage()
        assert first not in said[0].getMessage()  # no token in the logs
        for h in bots:
            m = await scrape(h)
            assert value(m, "clusterbot_slack_token_refresh_failing") == 1
        failures = [value(await scrape(h), "clusterbot_slack_token_refresh_failures_total")
                    for h in bots]
        assert sum(failures) == 2

        slack.oauth.refresh_refused = None  # Slack takes it again
        clock.advance(REFRESH_RETRY.total_seconds() + 1)
        await post_from_each(2)
        assert slack.oauth.refreshed == 1 and tried() == 3
        again = [r for r in caplog.records if "refreshed again" in r.getMessage()]
        assert [r.levelname for r in again] == ["WARNING"]
        assert value(await scrape(bots[2]), "clusterbot_slack_token_refresh_failing") == 0
        assert first not in {c.token for c in slack.calls[-3:]}


async def test_an_expired_token_stops_its_installation_only_and_its_refusal_ends_when_refreshed(
        tmp_path):
    """Issue 24's refused-token gate, per installation: T0ONE's token expires while Slack
    refuses its refresh — Slack's token_expired stops T0ONE's calls (one sent, the next refused
    before sending), T0TWO goes on; once the refresh works, the new token is used and the old
    one's refusal ends (before: the refused-token gauge, its alert and /readyz's note stayed on
    for a token no longer used)."""
    clock = ManualClock(datetime.now(UTC).replace(microsecond=0))
    async with fake_slack(clock) as slack:
        slack.oauth.rotation = True
        async with bot(tmp_path, slack=slack, clock=clock, env=oauth_env(slack)) as h:
            await install(h, team=ONE)
            clock.advance(6 * 3600)
            await install(h, team=TWO)  # six hours younger than T0ONE's
            tokens = {g.team_id: t for t, g in slack.oauth.tokens.items()}
            for team, person in ((ONE, DAVE), (TWO, ALICE)):
                async with SlackRequests(events_url=h.requests.events_url, signing_secret=SECRET,
                                         slack=slack, team_id=team) as someone:
                    await someone.app_home_opened(person)
            await h.rt.settle()
            slack.oauth.refresh_refused = "invalid_refresh_token"
            clock.advance(6 * 3600 + 1)  # T0ONE's token has expired; T0TWO's has 6 hours left

            def sent(token: str) -> int:
                return len([c for c in slack.calls if c.method == "chat.postMessage"
                            and c.token == token])

            for _ in range(2):
                with pytest.raises(SlackApiError):
                    await h.rt.slack.chat_postMessage(channel=DAVE, text="for T0ONE")
            assert sent(tokens[ONE]) == 1  # Slack said token_expired; the second was not sent
            assert (await h.rt.slack.chat_postMessage(channel=ALICE, text="for T0TWO"))["ok"]
            assert value(await scrape(h), "clusterbot_slack_tokens_refused") == 1

            slack.oauth.refresh_refused = None
            clock.advance(REFRESH_RETRY.total_seconds() + 1)
            assert (await h.rt.slack.chat_postMessage(channel=DAVE, text="again"))["ok"]
            [new] = [t for t, g in slack.oauth.tokens.items()
                     if g.team_id == ONE and t != tokens[ONE]]
            assert slack.calls[-1].token == new
            m = await scrape(h)
            assert value(m, "clusterbot_slack_tokens_refused") == 0
            assert value(m, "clusterbot_slack_token_changes_total", state="replaced") == 1
            assert sent(tokens[TWO]) == 1 and sent(tokens[ONE]) == 1
