"""The bot's installations and OAuth states as Bolt and slack_sdk want them: an
`AsyncInstallationStore` and an `AsyncOAuthStateStore` over the database
(bot/services/installations.py), for several replicas (no files, no memory of its own).

Only the bot's token is kept: the app asks for no user scopes, so an installation has no
person's token to find (`find_installation(user_id=…)` answers the installation if that person
installed it, as slack_sdk's own stores do, without a user token).

An org-wide installation is saved with the workspaces of its organization the app was given
(`auth.teams.list`, with the new token, right after the exchange): the ones it serves until
Slack says otherwise (`team_access_granted` / `team_access_revoked`, bot/slack/tenancy.py).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import Any

from slack_sdk.oauth.installation_store import Bot
from slack_sdk.oauth.installation_store import Installation as SdkInstallation
from slack_sdk.oauth.installation_store.async_installation_store import AsyncInstallationStore
from slack_sdk.oauth.state_store.async_state_store import AsyncOAuthStateStore
from slack_sdk.web.async_client import AsyncWebClient

from bot.domain.installation import Installation
from bot.services.installations import Installations
from bot.slack.tenancy import SERVING

log = logging.getLogger(__name__)


def from_sdk(given: SdkInstallation | Bot) -> Installation:
    """Ours, from slack_sdk's (what the OAuth flow, or a token rotation, hands over)."""
    scopes = given.bot_scopes
    expires = given.bot_token_expires_at
    if not given.bot_token:
        raise ValueError("an installation without a bot token: the app asks for bot scopes")
    return Installation(
        enterprise_id=given.enterprise_id, team_id=given.team_id,
        org_wide=bool(given.is_enterprise_install), app_id=given.app_id,
        name=(given.enterprise_name if given.is_enterprise_install else given.team_name) or "",
        bot_token=given.bot_token, bot_id=given.bot_id, bot_user_id=given.bot_user_id,
        bot_scopes=",".join(scopes) if isinstance(scopes, list | tuple) else scopes or "",
        bot_refresh_token=given.bot_refresh_token,
        bot_token_expires_at=(None if expires is None
                              else datetime.fromtimestamp(int(expires), UTC)),
        installer_id=given.user_id if isinstance(given, SdkInstallation) else None,
        installed_at=datetime.fromtimestamp(given.installed_at, UTC))


def to_sdk(found: Installation) -> SdkInstallation:
    expires = found.bot_token_expires_at
    return SdkInstallation(
        app_id=found.app_id, enterprise_id=found.enterprise_id, team_id=found.team_id,
        enterprise_name=found.name if found.org_wide else None,
        team_name=None if found.org_wide else found.name,
        bot_token=found.bot_token, bot_id=found.bot_id, bot_user_id=found.bot_user_id,
        bot_scopes=found.bot_scopes, bot_refresh_token=found.bot_refresh_token,
        bot_token_expires_at=None if expires is None else int(expires.timestamp()),
        user_id=found.installer_id or "", is_enterprise_install=found.org_wide,
        installed_at=found.installed_at.timestamp())


async def org_workspaces(client: AsyncWebClient, found: Installation) -> list[str]:
    """The workspaces of `found`'s organization the app was given (auth.teams.list, every
    page), asked with `found`'s own token."""
    bound = SERVING.set(found)
    try:
        teams: list[str] = []
        cursor: str | None = None
        while True:
            answer = await client.auth_teams_list(cursor=cursor, limit=PAGE)
            teams += [str(t["id"]) for t in answer.get("teams") or [] if t.get("id")]
            cursor = (answer.get("response_metadata") or {}).get("next_cursor")
            if not cursor:
                return teams
    finally:
        SERVING.reset(bound)


PAGE = 200  # workspaces asked for per auth.teams.list page


class DatabaseInstallationStore(AsyncInstallationStore):
    """slack_sdk's installation store interface over the bot's database. A stopped
    installation is not found: nothing is called with its tokens."""

    def __init__(self, installations: Installations, *,
                 client: AsyncWebClient | None = None) -> None:
        self._installations = installations
        self._client = client  # lists an org-wide installation's workspaces

    @property
    def logger(self) -> logging.Logger:
        return log

    async def async_save(self, installation: SdkInstallation) -> None:
        found = from_sdk(installation)
        await self._installations.save(found)
        if not found.org_wide or self._client is None:
            return
        try:
            teams = await org_workspaces(self._client, found)
        except Exception as exc:  # installed: Slack's team_access_granted events say the rest
            log.warning("organization %s installed, but its workspaces could not be listed "
                        "(%s): a workspace is served once Slack says the app was given to it",
                        found.key, type(exc).__name__)
            return
        await self._installations.grant(found.key, teams)

    async def async_save_bot(self, bot: Bot) -> None:
        await self._installations.save(from_sdk(bot))

    async def async_find_installation(self, *, enterprise_id: str | None, team_id: str | None,
                                      user_id: str | None = None,
                                      is_enterprise_install: bool | None = False
                                      ) -> SdkInstallation | None:
        found = await self._installations.find(
            enterprise_id=enterprise_id, team_id=team_id, user_id=user_id,
            org_wide=bool(is_enterprise_install))
        return None if found is None or found.stopped_at is not None else to_sdk(found)

    async def async_find_bot(self, *, enterprise_id: str | None, team_id: str | None,
                             is_enterprise_install: bool | None = False) -> Bot | None:
        found = await self.async_find_installation(
            enterprise_id=enterprise_id, team_id=team_id,
            is_enterprise_install=is_enterprise_install)
        return None if found is None else found.to_bot()

    async def async_delete_installation(self, *, enterprise_id: str | None,
                                        team_id: str | None, user_id: str | None = None
                                        ) -> None:
        """Bolt's uninstall: stopped, its data kept (bot/services/installations.py)."""
        found = await self._installations.find(enterprise_id=enterprise_id, team_id=team_id,
                                               org_wide=team_id is None)
        if found is not None:
            await self._installations.stop(found.key, why="app_uninstalled")

    async def async_delete_bot(self, *, enterprise_id: str | None,
                               team_id: str | None) -> None:
        await self.async_delete_installation(enterprise_id=enterprise_id, team_id=team_id)


class DatabaseStateStore(AsyncOAuthStateStore):
    """The install page's states in the database: issued by one replica, taken back once by
    whichever serves Slack's redirect."""

    def __init__(self, installations: Installations) -> None:
        self._installations = installations

    @property
    def logger(self) -> logging.Logger:
        return log

    async def async_issue(self, *args: Any, **kwargs: Any) -> str:
        return await self._installations.issue_state()

    async def async_consume(self, state: str) -> bool:
        return await self._installations.consume_state(state)
