"""The Slack side of `Directory`: members of a user group (scope `usergroups:read`), whether a
person is a guest (`users:read`), and a
public channel by its name (scope `channels:read`), for a `#name` Slack did not link."""

from __future__ import annotations

from slack_sdk.web.async_client import AsyncWebClient

from bot.domain.installation import Installed

PAGE = 200  # channels a conversations.list page asks for (Slack suggests at most 200)


class SlackDirectory:
    def __init__(self, client: AsyncWebClient) -> None:
        self._client = client

    async def group_members(self, group_id: str) -> frozenset[str]:
        response = await self._client.usergroups_users_list(usergroup=group_id)
        return frozenset(response.get("users") or [])

    async def is_guest(self, user_id: str) -> bool:
        """users.info (scope `users:read`): multi- and single-channel guests."""
        response = await self._client.users_info(user=user_id)
        user = response.get("user") or {}
        return bool(user.get("is_restricted") or user.get("is_ultra_restricted"))

    async def installed(self) -> Installed:
        """auth.test: the token's workspace, or its organization for an org-wide install."""
        response = await self._client.auth_test()
        return Installed(team_id=response.get("team_id") or None,
                         enterprise_id=response.get("enterprise_id") or None,
                         org_wide=bool(response.get("is_enterprise_install")))

    async def channel_named(self, name: str) -> str | None:
        """The id of the public channel called `name` (None: no such channel, or archived)."""
        cursor = ""
        while True:
            response = await self._client.conversations_list(
                types="public_channel", exclude_archived=True, limit=PAGE, cursor=cursor or None)
            for channel in response.get("channels") or []:
                if channel.get("name") == name:
                    return str(channel["id"])
            cursor = (response.get("response_metadata") or {}).get("next_cursor") or ""
            if not cursor:
                return None
