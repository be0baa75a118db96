"""`LocalWorkspace`: Slack on this machine — FakeSlack, SlackRequests, and who is typing where.

async with FakeSlack() as slack:
    ...  # serve the bot with AsyncWebClient(base_url=slack.api_url) → events_url
    async with LocalWorkspace(slack=slack, events_url=events_url,
                              signing_secret=secret, approvers=["bob"]) as workspace:
        await run_repl(workspace, input=sys.stdin, output=sys.stdout)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from devslack.closing import Closing
from devslack.models import Message, SlackError, SlackUser
from devslack.reply import Reply
from devslack.requests import SlackRequests
from devslack.webapi import FakeSlack


class LocalWorkspace(Closing):
    """One person at a time typing into one channel of a FakeSlack, through a signed client."""

    def __init__(
        self,
        *,
        slack: FakeSlack,
        events_url: str,
        signing_secret: str,
        approvers: Iterable[str] = (),
        user: str = "alice",
        channel: str = "general",
        settle_quiet: float = 0.2,
    ) -> None:
        self.slack = slack
        self.requests = SlackRequests(
            events_url=events_url, signing_secret=signing_secret, slack=slack
        )
        self.approvers = {slack.user(a).id for a in approvers}
        self.user: SlackUser = slack.user(user)
        self.channel: str = slack.resolve_channel(channel)
        self.settle_quiet = settle_quiet

    async def aclose(self) -> None:
        await self.requests.aclose()

    # -- who and where -----------------------------------------------------------------------

    def people(self) -> list[tuple[SlackUser, bool]]:
        """Everyone in the workspace, with whether they approve spend."""
        return [(u, u.id in self.approvers) for u in self.slack.users.values()]

    def switch_user(self, ref: str) -> SlackUser:
        """Become `ref` (a name like `bob`, `@bob`, or an id like `U0BOB`)."""
        try:
            self.user = self.slack.user(ref)
        except SlackError as exc:
            raise LookupError(f"nobody called {ref!r} here") from exc
        return self.user

    def switch_channel(self, ref: str) -> tuple[str, bool]:
        """Move to `#name` (created if new); returns the channel id and whether it was new."""
        try:
            self.channel = self.slack.resolve_channel(ref)
            return self.channel, False
        except SlackError:
            self.channel = self.slack.add_channel(ref)
            return self.channel, True

    @property
    def channel_label(self) -> str:
        return "#" + self.slack.channel_name(self.channel)

    # -- doing things as the current user ----------------------------------------------------

    async def command(self, line: str) -> Reply:
        """Type a slash command line such as `/cluster quote h100x8 nodes=4`."""
        command, _, text = line.strip().partition(" ")
        return await self.requests.slash(
            command, text.strip(), user_id=self.user.id, channel_id=self.channel
        )

    async def click(
        self, surface: Message | Mapping[str, Any], action_id: str, *, block_id: str | None
    ) -> Reply:
        return await self.requests.click(
            surface, action_id, block_id=block_id, user_id=self.user.id
        )

    async def submit(
        self, view: Mapping[str, Any], values: Mapping[str, Mapping[str, Any]]
    ) -> Reply:
        return await self.requests.submit_view(view, user_id=self.user.id, values=values)

    async def close(self, view: Mapping[str, Any]) -> Reply | None:
        return await self.requests.close_view(view, user_id=self.user.id)

    async def open_home(self) -> Reply:
        return await self.requests.app_home_opened(self.user.id)

    def current_modal(self) -> dict[str, Any] | None:
        return self.slack.current_modal(self.user.id)

    async def settle(self) -> None:
        """Wait for the bot's follow-ups to a request to land in FakeSlack."""
        await self.slack.settle(quiet=self.settle_quiet)
