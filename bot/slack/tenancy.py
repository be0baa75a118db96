"""Which installation a request is served by, and so whose token its Slack calls carry (OAuth
mode: SLACK_CLIENT_ID set; the single-token mode never comes here).

Bolt asks `authorize` for every request: the installation is found in the database by the
request's organization and workspace (bot/services/installations.py) — no call to Slack on the
way to the ack — and kept in the request's context (`INSTALLATION`, what the gate judges the
request against) and in `SERVING`, a context variable the listener's task (and everything it
starts) inherits: the bot's Slack client (bot/app/slack_client.py) reads it for each call that
names no token of its own. A stopped installation (tokens revoked, app uninstalled) serves
nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any

from slack_bolt.authorization import AuthorizeResult
from slack_bolt.context.async_context import AsyncBoltContext

from bot.domain.installation import Installation
from bot.services.installations import Installations

INSTALLATION = "installation"  # the Bolt context's key: the Installation serving the request
SERVING: ContextVar[Installation | None] = ContextVar("serving", default=None)

Authorize = Callable[..., Awaitable[AuthorizeResult | None]]


class NotInstalled(Exception):
    """A Slack call with no installation to make it for (OAuth mode): nothing was sent."""


def authorize(installations: Installations) -> Authorize:
    # Not keyword-only: Bolt passes what the function's argument names ask for.
    async def authorize(context: AsyncBoltContext, enterprise_id: str | None,
                        team_id: str | None, user_id: str | None) -> AuthorizeResult | None:
        found = await installations.find(enterprise_id=enterprise_id, team_id=team_id,
                                         org_wide=bool(context.is_enterprise_install))
        if found is None or found.stopped_at is not None:
            return None
        context[INSTALLATION] = found
        SERVING.set(found)
        return AuthorizeResult(enterprise_id=found.enterprise_id, team_id=found.team_id,
                               bot_token=found.bot_token, bot_id=found.bot_id,
                               bot_user_id=found.bot_user_id, user_id=user_id,
                               bot_scopes=found.bot_scopes.split(","))

    return authorize


def token_for(api_method: str, kwargs: dict[str, Any]) -> str | None:
    """The token a call made with no token of its own carries: the serving installation's.
    None: the call names its own (oauth.v2.access's client credentials, an explicit token)."""
    if api_method.startswith("oauth.") or any(
            isinstance(part, dict) and "token" in part
            for part in (kwargs.get("params"), kwargs.get("json"), kwargs.get("data"))):
        return None
    serving = SERVING.get()
    if serving is None:
        raise NotInstalled(f"{api_method}: no installation is serving this call")
    return serving.bot_token
