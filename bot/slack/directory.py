"""The Slack side of `Directory`: members of a user group (scope `usergroups:read`)."""

from __future__ import annotations

from slack_sdk.web.async_client import AsyncWebClient


class SlackDirectory:
    def __init__(self, client: AsyncWebClient) -> None:
        self._client = client

    async def group_members(self, group_id: str) -> frozenset[str]:
        response = await self._client.usergroups_users_list(usergroup=group_id)
        return frozenset(response.get("users") or [])
