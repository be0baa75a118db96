"""Issue 29, item 2: installing through Slack's OAuth v2 flow, several workspaces.

The real protocol on loopback: a browser (a cookie-keeping HTTP client) opens the bot's
/slack/install, follows its Add to Slack link to the local Slack's authorize page, is sent back
to /slack/oauth_redirect with a code and the state, and the bot exchanges the code
(oauth.v2.access) and stores the installation. Then signed requests from each workspace are
answered with that workspace's own token, never the other's.
"""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import aiohttp
import sqlalchemy as sa

from bot.clock import ManualClock
from devslack.oauth import AUTHORIZE_PATH
from devslack.requests import SlackRequests
from tests.e2e.harness import ALICE, BOB, SECRET, START, Harness, bot, fake_slack

ONE, TWO = "T0ONE", "T0TWO"


def oauth_env(slack) -> dict[str, str | None]:
    return {"SLACK_BOT_TOKEN": None, "SLACK_CLIENT_ID": slack.oauth.client_id,
            "SLACK_CLIENT_SECRET": slack.oauth.client_secret,
            "SLACK_AUTHORIZE_URL": f"{slack.base_url}{AUTHORIZE_PATH}"}


@asynccontextmanager
async def oauth_bot(tmp_path: Path, **options) -> AsyncIterator[Harness]:
    clock = ManualClock(START)
    async with fake_slack(clock) as slack, bot(tmp_path, slack=slack, clock=clock,
                                                env=oauth_env(slack), **options) as h:
        yield h


def base_url(h) -> str:
    return h.requests.events_url.removesuffix("/slack/events")


async def install(h, *, team: str | None = None, enterprise: str | None = None
                  ) -> tuple[int, str]:
    """Add to Slack, as a person in a browser: the page, Slack's authorize page (for `team`,
    or org-wide for `enterprise`), and back. Returns the last page's status and text."""
    h.slack.oauth.redirect_uri = f"{base_url(h)}/slack/oauth_redirect"  # the app's setting
    # Cookies for 127.0.0.1, its Secure state cookie included: loopback is a secure origin to
    # a browser, as it is here.
    jar = aiohttp.CookieJar(unsafe=True, treat_as_secure_origin=[base_url(h)])
    async with aiohttp.ClientSession(cookie_jar=jar) as browser:
        async with browser.get(f"{base_url(h)}/slack/install") as page:
            assert page.status == 200, await page.text()
            link = html.unescape(re.search(r'href="([^"]*oauth/v2/authorize[^"]*)"',
                                           await page.text())[1])
        asked = parse_qs(urlsplit(link).query)
        assert asked["state"] and asked["client_id"] == [h.slack.oauth.client_id]
        assert "chat:write" in asked["scope"][0].split(",")
        where = f"&team={team}" if team else f"&enterprise={enterprise}" if enterprise else ""
        async with browser.get(link + where) as back:
            return back.status, await back.text()


async def test_two_workspaces_installed_through_the_flow_each_answered_with_its_own_token(
        tmp_path):
    async with oauth_bot(tmp_path) as h:
        status, page = await install(h, team=ONE)
        assert status == 200 and "installed" in page and ONE in page and "/cluster help" in page
        assert (await install(h, team=TWO))[0] == 200
        tokens = {g.team_id: t for t, g in h.slack.oauth.tokens.items()}
        assert set(tokens) == {ONE, TWO} and tokens[ONE] != tokens[TWO]

        for team, user in ((ONE, ALICE), (TWO, BOB), (ONE, BOB)):
            before = len(h.slack.calls)
            async with SlackRequests(events_url=h.requests.events_url, signing_secret=SECRET,
                                     slack=h.slack, team_id=team) as person:
                await person.app_home_opened(user)
            await h.rt.settle()
            calls = [c for c in h.slack.calls[before:] if c.method == "views.publish"]
            assert calls and all(c.token == tokens[team] and c.response.get("ok")
                                 for c in calls), (team, [(c.token, c.response) for c in calls])
            assert h.slack.home(user) is not None

        # The tokens are sealed at rest.
        async with h.rt.db.engine.connect() as conn:
            stored = (await conn.execute(sa.text(
                "SELECT bot_token FROM slack_installations"))).scalars().all()
        assert len(stored) == 2 and not set(stored) & set(tokens.values())


async def test_a_workspace_not_installed_is_not_served(tmp_path):
    async with oauth_bot(tmp_path) as h:
        await install(h, team=ONE)
        before = len(h.slack.calls)
        async with SlackRequests(events_url=h.requests.events_url, signing_secret=SECRET,
                                 slack=h.slack, team_id="T0ELSE") as stranger:
            reply = await stranger.app_home_opened(ALICE)
        await h.rt.settle()
        assert reply.status == 200
        assert [c.method for c in h.slack.calls[before:]] == []


async def test_a_replayed_or_forged_state_installs_nothing(tmp_path):
    async with oauth_bot(tmp_path) as h:
        h.slack.oauth.redirect_uri = f"{base_url(h)}/slack/oauth_redirect"
        async with aiohttp.ClientSession() as browser, browser.get(
                f"{base_url(h)}/slack/oauth_redirect?code=whatever&state=made-up") as page:
            assert page.status == 400 and "not installed" in await page.text()
        async with aiohttp.ClientSession() as browser, browser.get(
                f"{base_url(h)}/slack/oauth_redirect?error=access_denied") as page:
            assert "cancelled" in await page.text()
        assert h.slack.oauth.tokens == {}


def test_the_oauth_settings_go_together_and_say_what_is_wrong():
    import pytest

    from bot.config.settings import ConfigError, load_settings

    base = {"SLACK_SIGNING_SECRET": SECRET, "AIRESERVE_SIMULATOR": "embedded"}
    with pytest.raises(ConfigError, match="SLACK_CLIENT_ID and SLACK_CLIENT_SECRET go together"):
        load_settings({**base, "SLACK_CLIENT_ID": "1.2"})
    with pytest.raises(ConfigError, match="SLACK_BOT_TOKEN contradict"):
        load_settings({**base, "SLACK_CLIENT_ID": "1.2", "SLACK_CLIENT_SECRET": "s",
                       "SLACK_BOT_TOKEN": "xoxb-1"})
    settings = load_settings({**base, "SLACK_CLIENT_ID": "1.2", "SLACK_CLIENT_SECRET": "s",
                              "APPROVALS_CHANNEL": "C0A", "APPROVERS": "U0B"})
    assert settings.oauth and settings.has_slack_credentials
    settings.require_slack()  # no SLACK_BOT_TOKEN needed
