"""The Slack side of `Directory`: members of a user group (scope `usergroups:read`), and a
public channel by its name (scope `channels:read`), for a `#name` Slack did not link."""

from __future__ import annotations

from slack_sdk.web.async_client import AsyncWebClient

PAGE = 200  # channels a conversations.list page asks for (Slack suggests at most 200)


class SlackDirectory:
    def __init__(self, client: AsyncWebClient) -> None:
        self._client = client

    async def group_members(self, group_id: str) -> frozenset[str]:
        response = await self._client.usergroups_users_list(usergroup=group_id)
        return frozenset(response.get("users") or [])

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
