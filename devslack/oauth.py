"""Slack's OAuth v2 install, for the local Slack: the authorize page and `oauth.v2.access`.

    slack.oauth.client_id, slack.oauth.client_secret   # what the app is configured with
    GET {base_url}/oauth/v2/authorize?client_id=…&scope=…&state=…[&redirect_uri=…][&team=T…]
        → 302 to the redirect URL with `code` and `state` (the installer said Allow at once)
    oauth.v2.access (client id and secret: HTTP Basic, or as arguments)
        code=…                                   → a bot token for that workspace (or org)
        grant_type=refresh_token&refresh_token=… → a new token pair (rotating tokens only)

Which workspace installs: the authorize URL's `team` (Slack's own parameter to preselect one),
else the fake's own; `enterprise=E…` without a team is an org-wide install of that Enterprise
organization (the fake's own extension: Slack asks the installer), serving the workspaces
`workspaces[enterprise]` lists (its admins gave the app to them; `auth.teams.list` answers
them, paged). With `rotation`, bot tokens
expire after `lifetime` and come with a refresh token; a refresh token is good once. Every
token issued is answered by the Web API (auth.test says whose it is); an expired one gets
`token_expired`, a revoked one `token_revoked`, as Slack answers them.
"""

from __future__ import annotations

import base64
import secrets
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from bot.clock import Clock
from devslack.models import SlackError

AUTHORIZE_PATH = "/oauth/v2/authorize"


@dataclass(frozen=True)
class Grant:
    """Whom a token (or a code, or a refresh token) was issued for."""

    team_id: str | None
    enterprise_id: str | None = None
    org_wide: bool = False
    scope: str = ""
    expires_at: datetime | None = None

    @property
    def key(self) -> str:
        return str(self.enterprise_id if self.org_wide else self.team_id)


class OAuthServer:
    def __init__(self, *, clock: Clock, team_id: str, app_id: str, bot_user_id: str,
                 client_id: str = "devslack-client-id",
                 client_secret: str = "devslack-client-secret",
                 lifetime: timedelta = timedelta(hours=12)) -> None:
        self.clock = clock
        self.team_id = team_id
        self.app_id = app_id
        self.bot_user_id = bot_user_id
        self.client_id = client_id
        self.client_secret = client_secret
        self.rotation = False  # True: tokens expire after `lifetime`, with a refresh token
        self.lifetime = lifetime
        self.redirect_uri: str | None = None  # the app's configured one, if the URL has none
        self.tokens: dict[str, Grant] = {}
        self.revoked: set[str] = set()
        self.refreshed = 0  # refresh-token exchanges answered (tests count them)
        self.workspaces: dict[str, list[str]] = {}  # organization → workspaces given the app
        self.refresh_refused: str | None = None  # while set: every refresh's answer (an error)
        self._codes: dict[str, Grant] = {}
        self._refresh: dict[str, Grant] = {}

    # -- the authorize page ------------------------------------------------------------------

    async def authorize(self, request: web.Request) -> web.StreamResponse:
        query = request.query
        if query.get("client_id") != self.client_id:
            return web.Response(status=400, text="invalid_client_id")
        target = query.get("redirect_uri") or self.redirect_uri
        if not target:
            return web.Response(status=400, text="no redirect_uri, and none configured")
        enterprise, team = query.get("enterprise"), query.get("team")
        grant = Grant(team_id=team or (None if enterprise else self.team_id),
                      enterprise_id=enterprise, org_wide=bool(enterprise and not team),
                      scope=query.get("scope", ""))
        code = f"code-{secrets.token_hex(8)}"
        self._codes[code] = grant
        back = {"code": code, **({"state": query["state"]} if "state" in query else {})}
        raise web.HTTPFound(f"{target}{'&' if '?' in target else '?'}{urlencode(back)}")

    # -- oauth.v2.access ---------------------------------------------------------------------

    def access(self, args: dict[str, Any], authorization: str | None) -> dict[str, Any]:
        client_id, secret = _basic(authorization) or (args.get("client_id"),
                                                      args.get("client_secret"))
        if client_id != self.client_id:
            raise SlackError("invalid_client_id")
        if secret != self.client_secret:
            raise SlackError("bad_client_secret")
        if args.get("grant_type") == "refresh_token":
            if self.refresh_refused:
                raise SlackError(self.refresh_refused)
            grant = self._refresh.pop(str(args.get("refresh_token")), None)
            if grant is None:
                raise SlackError("invalid_refresh_token")
            self.refreshed += 1
            return self._issue(grant, refresh_only=True)
        if args.get("grant_type") not in (None, "authorization_code"):
            raise SlackError("invalid_grant_type")
        grant = self._codes.pop(str(args.get("code")), None)
        if grant is None:
            raise SlackError("invalid_code")
        return self._issue(grant, refresh_only=False)

    def _issue(self, grant: Grant, *, refresh_only: bool) -> dict[str, Any]:
        rotating = self.rotation
        prefix = "xoxe.xoxb-" if rotating else "xoxb-"
        token = f"{prefix}{grant.key}-{secrets.token_hex(6)}"
        expires = self.clock.now() + self.lifetime if rotating else None
        self.tokens[token] = replace(grant, expires_at=expires)
        answer: dict[str, Any] = {"access_token": token, "token_type": "bot",
                                  "scope": grant.scope}
        if rotating:
            refresh = f"xoxe-1-{secrets.token_hex(8)}"
            self._refresh[refresh] = grant
            answer |= {"refresh_token": refresh, "expires_in": int(self.lifetime.total_seconds())}
        if refresh_only:
            return answer
        return answer | {
            "bot_user_id": self.bot_user_id, "app_id": self.app_id,
            "team": None if grant.org_wide else {"id": grant.team_id,
                                                  "name": f"{grant.team_id} (devslack)"},
            "enterprise": ({"id": grant.enterprise_id, "name": f"{grant.enterprise_id} org"}
                           if grant.enterprise_id else None),
            "is_enterprise_install": grant.org_wide,
            "authed_user": {"id": "U0INSTALLER"},
        }

    # -- what the Web API asks ---------------------------------------------------------------

    def refusal(self, token: str) -> str | None:
        """Why `token` (not the fake's own bot token) is not taken (None: it is)."""
        grant = self.tokens.get(token)
        if grant is None:
            return "invalid_auth"
        if token in self.revoked:
            return "token_revoked"
        if grant.expires_at is not None and self.clock.now() >= grant.expires_at:
            return "token_expired"
        return None

    def team_of(self, token: str) -> str | None:
        """The workspace an issued token answers as (None: the fake's own)."""
        grant = self.tokens.get(token)
        return None if grant is None else grant.team_id

    def auth_test(self, method: str, token: str, answer: dict[str, Any]) -> dict[str, Any]:
        """auth.test's answer says whose an issued token is; any other answer is as it is."""
        grant = self.tokens.get(token)
        if grant is None or method != "auth.test":
            return answer
        return {**answer, "team_id": grant.team_id or "", "enterprise_id": grant.enterprise_id,
                "is_enterprise_install": grant.org_wide}

    def teams_list(self, token: str, args: dict[str, Any]) -> dict[str, Any]:
        """auth.teams.list: the workspaces an org-wide token serves (a workspace token: its
        own), a page at a time (`limit`, `cursor`)."""
        grant = self.tokens.get(token)
        teams = ([self.team_id] if grant is None
                 else self.workspaces.get(str(grant.enterprise_id), []) if grant.org_wide
                 else [str(grant.team_id)])
        start, limit = int(args.get("cursor") or 0), int(args.get("limit") or 100)
        page, more = teams[start:start + limit], start + limit < len(teams)
        return {"teams": [{"id": t, "name": f"{t} (devslack)"} for t in page],
                "response_metadata": {"next_cursor": str(start + limit) if more else ""}}

    def revoke(self, key: str) -> None:
        """Every token of the installation `key` (a team, or an org installed org-wide)."""
        self.revoked |= {token for token, grant in self.tokens.items() if grant.key == key}


def _basic(header: str | None) -> tuple[str, str] | None:
    if not header or not header.startswith("Basic "):
        return None
    try:
        user, _, password = base64.b64decode(header[6:]).decode().partition(":")
    except ValueError:
        return None
    return user, password
