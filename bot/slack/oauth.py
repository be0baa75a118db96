"""Installing the app through Slack's OAuth v2 flow (SLACK_CLIENT_ID and SLACK_CLIENT_SECRET
set): `/slack/install`, an "Add to Slack" page with a state, and `/slack/oauth_redirect`, where
Slack sends the installer back with a code — exchanged (oauth.v2.access), stored, and answered
with a page that says what to do next.

Bolt's own flow (`AsyncOAuthFlow`, `AsyncOAuthSettings`) over the bot's database: the states
and the installations live there (bot/slack/installs.py), so the page and the redirect may be
served by different replicas. The exchange goes through the bot's Slack HTTP session to
SLACK_API_URL (the local Slack's in tests and `make run`).
"""

from __future__ import annotations

import html
import logging

from aiohttp import web
from slack_bolt.oauth.async_callback_options import (
    AsyncCallbackOptions,
    AsyncFailureArgs,
    AsyncSuccessArgs,
)
from slack_bolt.oauth.async_oauth_flow import AsyncOAuthFlow
from slack_bolt.oauth.async_oauth_settings import AsyncOAuthSettings
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.web.async_client import AsyncWebClient

from bot.services.installations import Installations
from bot.slack.installs import DatabaseInstallationStore, DatabaseStateStore

log = logging.getLogger(__name__)

INSTALL_PATH = "/slack/install"
REDIRECT_PATH = "/slack/oauth_redirect"
# The bot scopes every installation is asked for: manifest.yaml's (tests/test_manifest.py).
BOT_SCOPES = ("commands", "chat:write", "chat:write.public", "files:write", "im:write",
              "usergroups:read", "channels:read", "users:read",
              # a post whose answer was lost is looked for, not resent (bot/slack/maybe.py)
              "channels:history", "groups:history", "im:history")

_PAGE = """<!doctype html><html lang="en"><head><meta charset="utf-8">
<title>Cluster Bot: {title}</title></head><body style="font-family: sans-serif; max-width: 40em;
margin: 3em auto; line-height: 1.5"><h1>{title}</h1>{body}</body></html>"""


def _page(title: str, body: str, status: int) -> BoltResponse:
    return BoltResponse(status=status, body=_PAGE.format(title=html.escape(title), body=body),
                        headers={"Content-Type": "text/html; charset=utf-8"})


async def _installed(args: AsyncSuccessArgs) -> BoltResponse:
    found = args.installation
    where = (f"the {found.enterprise_name or found.enterprise_id} organization (every workspace "
             "of it)" if found.is_enterprise_install
             else f"the {found.team_name or found.team_id} workspace")
    return _page("installed", f"""<p>Cluster Bot is installed in {html.escape(where)}.</p>
<p>What to do next:</p><ol>
<li>Invite the bot to the channel where approvals go: <code>/invite @clusterbot</code> there.</li>
<li>Ask whoever runs the bot to set that channel and the approvers for this installation.</li>
<li>Type <code>/cluster help</code> in any channel to see what it does, then
<code>/cluster quote h100x8 nodes=2</code> to price a cluster.</li></ol>
<p>You can close this page.</p>""", 200)


async def _failed(args: AsyncFailureArgs) -> BoltResponse:
    reasons = {"access_denied": "the installation was cancelled in Slack",
               "invalid_browser": "this browser did not start the installation (start again "
                                  "from the install page, in one browser)",
               "invalid_state": "the install link has expired or was used already",
               "invalid_code": "Slack did not accept the installation code",
               "storage_error": "the installation could not be stored"}
    why = reasons.get(args.reason, f"Slack said {args.reason}")
    log.warning("an installation did not complete: %s", args.reason)
    return _page("not installed", f"<p>Cluster Bot was not installed: {html.escape(why)}. "
                 f'<a href="{INSTALL_PATH}">Start again</a>.</p>', args.suggested_status_code)


def oauth_flow(installations: Installations, *, client: AsyncWebClient, client_id: str,
               client_secret: str, redirect_uri: str | None, authorize_url: str,
               refresh_minutes: int) -> AsyncOAuthFlow:
    settings = AsyncOAuthSettings(
        client_id=client_id, client_secret=client_secret, scopes=list(BOT_SCOPES),
        user_scopes=[], redirect_uri=redirect_uri, install_path=INSTALL_PATH,
        redirect_uri_path=REDIRECT_PATH, authorization_url=authorize_url,
        installation_store=DatabaseInstallationStore(installations, client=client),
        state_store=DatabaseStateStore(installations),
        token_rotation_expiration_minutes=refresh_minutes,
        callback_options=AsyncCallbackOptions(success=_installed, failure=_failed),
        logger=log)
    return AsyncOAuthFlow(client=client, settings=settings)


def oauth_routes(app: web.Application, flow: AsyncOAuthFlow) -> None:
    """Serve the install page and the redirect on `app` (the public port, beside
    /slack/events)."""

    async def serve(request: web.Request) -> web.Response:
        bolt_request = AsyncBoltRequest(body="", query=request.query_string,
                                        headers=dict(request.headers))
        try:
            response = await (flow.handle_installation(bolt_request)
                              if request.path == INSTALL_PATH
                              else flow.handle_callback(bolt_request))
        except Exception:
            log.exception("could not serve %s", request.path)
            response = _page("not installed", "<p>Something went wrong on our side; nothing was "
                             f'installed. <a href="{INSTALL_PATH}">Try again</a> in a '
                             "minute.</p>", 503)
        answer = web.Response(status=response.status, body=response.body)
        for name, values in response.headers.items():
            for value in values:
                answer.headers.add(name, value)
        return answer

    app.router.add_get(INSTALL_PATH, serve)
    app.router.add_get(REDIRECT_PATH, serve)
