"""Which installation a request is served by, and so whose token each Slack call carries (OAuth
mode: SLACK_CLIENT_ID set; the single-token mode never comes here).

Bolt asks `authorize` for every request: the installation is found in the database by the
request's organization and workspace (bot/services/installations.py) — no call to Slack on the
way to the ack — and kept in the request's context (`INSTALLATION`, what the gate judges the
request against) and in `SERVING`, a context variable the listener's task (and everything it
starts) inherits. Once the gate has let the request through, the channel and the people it
names are remembered as that installation's (`Tenancy.learn`).

The bot's Slack client (bot/app/slack_client.py) asks `Tenancy.token_for` for each call that
names no token of its own: the serving installation's; outside any request (a sweep, the
outbox, a retry on another replica) the installation the call's channel or person was learned
from, DM channels included (learned from conversations.open's answer). A call with no
installation to make it for, or for a stopped one (tokens revoked, app uninstalled), is not
sent: `NotInstalled`.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from contextvars import ContextVar
from datetime import timedelta
from typing import Any

from slack_bolt.authorization import AuthorizeResult
from slack_bolt.context.async_context import AsyncBoltContext
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse

from bot.domain.installation import Installation
from bot.services.installations import Exchange, Installations
from bot.services.people import People
from bot.slack.tokens import fingerprint

INSTALLATION = "installation"  # the Bolt context's key: the Installation serving the request
SERVING: ContextVar[Installation | None] = ContextVar("serving", default=None)
FRESH_SECONDS = 30.0  # an installation read is used this long (a stop is seen within it)
# The argument naming whom a call is for, by preference (a channel over a person).
_TARGETS = ("channel", "channel_id", "user_id", "user", "users")

STOPPING = frozenset({"tokens_revoked", "app_uninstalled"})  # events that stop an installation
# Events that change which workspaces of its organization an org-wide installation serves.
ACCESS = {"team_access_granted": True, "team_access_revoked": False}
Authorize = Callable[..., Awaitable[AuthorizeResult | None]]


class NotInstalled(Exception):
    """A Slack call with no usable installation to make it for: nothing was sent."""


def _authorize(installations: Installations) -> Authorize:
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


def target_of(kwargs: Mapping[str, Any]) -> str | None:
    """The channel or person a Web API call is for, from its arguments."""
    for part in (kwargs.get("json"), kwargs.get("params"), kwargs.get("data"), kwargs):
        if isinstance(part, Mapping):
            for name in _TARGETS:
                value = part.get(name)
                if isinstance(value, str) and value:
                    return value.split(",")[0]
    return None


def _explicit(api_method: str, kwargs: Mapping[str, Any]) -> bool:
    """The call names its own credentials (oauth.v2.access's, an explicit token)."""
    return api_method.startswith("oauth.") or any(
        isinstance(part, Mapping) and "token" in part
        for part in (kwargs.get("params"), kwargs.get("json"), kwargs.get("data")))


class Tenancy:
    def __init__(self, installations: Installations, *, exchange: Exchange | None = None,
                 ahead: timedelta = timedelta(minutes=120),
                 replaced: Callable[[str], None] = lambda key: None) -> None:
        self._installations = installations
        self._replaced = replaced  # a token's fingerprint, replaced by a refreshed one
        self._held: dict[str, str] = {}  # installation key → the fingerprint of its token
        self._exchange = exchange  # a rotating token's refresh (oauth.v2.access)
        self._ahead = ahead
        self.authorize = _authorize(installations)  # what Bolt asks for every request
        self._routes: dict[str, str] = {}  # target → installation key (learned; never stale)
        self._read: dict[str, tuple[Installation | None, float]] = {}
        # Whose policy names which channels (set by the runtime): the serving request's own
        # approvals channel is learned as its installation's; one another installation's
        # policy names is never learned from a request (a click from elsewhere on its card).
        self.people: People | None = None

    async def learn(self, key: str, targets: Iterable[str | None]) -> None:
        new = {t for t in targets if t and self._routes.get(t) != key}
        if new:
            await self._installations.learn(key, new)
            self._routes.update(dict.fromkeys(new, key))

    async def installation_for(self, target: str | None) -> Installation | None:
        """The installation `target` was learned from, else the serving one. The target
        first: work a request's task does for other channels (a delivery pass sending what
        is queued) carries each channel's own installation's token, not the request's."""
        serving = SERVING.get()
        key = None if target is None else (self._routes.get(target)
                                           or await self._installations.route(target))
        if key is None or (serving is not None and serving.key == key):
            return serving
        self._routes[target or ""] = key
        found, at = self._read.get(key, (None, 0.0))
        if found is None or time.monotonic() - at > FRESH_SECONDS:
            found = await self._installations.get(key)
            self._read[key] = (found, time.monotonic())
        return found

    async def token_for(self, api_method: str, kwargs: Mapping[str, Any]) -> str | None:
        """The token a call carries (None: it names its own)."""
        if _explicit(api_method, kwargs):
            return None
        target = target_of(kwargs)
        found = await self.installation_for(target)
        if found is None:
            raise NotInstalled(f"{api_method}: no installation is known for {target or 'it'}")
        if found.stopped_at is not None:
            raise NotInstalled(f"{api_method}: installation {found.key} is stopped "
                               f"({found.stopped_why})")
        if self._exchange is not None and found.bot_refresh_token is not None:
            fresh = await self._installations.refreshed(found, ahead=self._ahead,
                                                        exchange=self._exchange)
            if fresh is not found:
                self._read[found.key] = (fresh, time.monotonic())
            found = fresh
        held, self._held[found.key] = self._held.get(found.key), fingerprint(found.bot_token)
        if held is not None and held != self._held[found.key]:
            self._replaced(held)  # refreshed (here or by another replica)
        return found.bot_token

    async def answered(self, api_method: str, kwargs: Mapping[str, Any],
                       answer: Mapping[str, Any]) -> None:
        """A DM channel opened for a person is that person's installation's."""
        if api_method == "conversations.open":
            channel = (answer.get("channel") or {}).get("id")
            found = await self.installation_for(target_of(kwargs))
            if found is not None and channel:
                await self.learn(found.key, [channel])

    def lifecycle(self) -> Callable[..., Awaitable[BoltResponse | None]]:
        """Before the gate: Slack says an installation's bot token was revoked
        (`tokens_revoked`) or the app uninstalled (`app_uninstalled`). The installation is
        stopped — no call is made for it any more, by any replica — and its data is kept.
        Or an organization's admins gave the app to workspaces, or took it back
        (`team_access_granted` / `_revoked`): the org-wide installation serves those
        workspaces from now on, or no more (before the gate: a workspace just given is not
        one the gate knows yet)."""

        async def lifecycle(req: AsyncBoltRequest, resp: BoltResponse,
                            next: Callable[[], Awaitable[None]]) -> BoltResponse | None:
            body = req.body if isinstance(req.body, dict) else {}
            found_event = body.get("event")
            event: dict[str, Any] = found_event if isinstance(found_event, dict) else {}
            kind = event.get("type")
            if kind in ACCESS:
                await self._access(req, event, granted=ACCESS[str(kind)])
                return BoltResponse(status=200, body="")
            if kind not in STOPPING:
                await next()
                return None
            revoked = (event.get("tokens") or {}).get("bot") if kind == "tokens_revoked" \
                else True  # only people's tokens revoked: the bot holds none of those
            found = await self._serving(req)
            if found is not None and revoked:
                await self._installations.stop(found.key, why=str(kind))
                self._read.pop(found.key, None)
            return BoltResponse(status=200, body="")

        return lifecycle

    async def _serving(self, req: AsyncBoltRequest) -> Installation | None:
        """The installation an event is for: Bolt doesn't authorize these (the token may be
        gone already)."""
        return await self._installations.find(
            enterprise_id=req.context.enterprise_id, team_id=req.context.team_id,
            org_wide=bool(req.context.is_enterprise_install))

    async def _access(self, req: AsyncBoltRequest, event: dict[str, Any], *,
                      granted: bool) -> None:
        found = await self._serving(req)
        given = event.get("team_ids")
        teams = [t for t in given if isinstance(t, str) and t] if isinstance(given, list) else []
        if found is None or not found.org_wide or not teams:
            return  # a workspace install has one workspace: nothing to change
        await (self._installations.grant if granted else self._installations.withdraw)(
            found.key, teams)

    def middleware(self) -> Callable[..., Awaitable[BoltResponse | None]]:
        """After the gate: the request's channel and people are its installation's, and the
        channels its own policy names (its approvals channel) — but not a channel another
        installation's policy names as its own."""

        async def learner(req: AsyncBoltRequest, resp: BoltResponse,
                          next: Callable[[], Awaitable[None]]) -> None:
            found = req.context.get(INSTALLATION)
            if isinstance(found, Installation):
                own = self.people.own_channels() if self.people else ()
                channel = req.context.channel_id
                claimed = self.people is not None and channel in self.people.claimed_channels()
                await self.learn(found.key, (None if claimed and channel not in own else channel,
                                             req.context.user_id, *own))
            await next()

        return learner
