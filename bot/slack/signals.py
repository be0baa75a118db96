"""Slack's own word about the bot's targets, acted on when Slack says it — not at the next probe.

Events (manifest.yaml's `bot_events`), each signed and past the workspace gate like any request:

- `channel_archive` / `member_left_channel` (the bot itself left or was removed): the channel
  is recorded unreachable at once (`is_archived` / `not_in_channel`), so nothing is tried
  there; what is meant for it is held, not dropped (bot/slack/unreachable.py);
- `channel_unarchive` / `member_joined_channel` (the bot itself): the record is cleared and
  what waited goes out at once — pending approval cards, the cards of clusters found at
  AI Reserve meanwhile, held notices and posts — each claimed, so once;
- `user_change`: a person deactivated (`deleted`) is recorded unreachable at once (the admins
  and the approvals channel hear what they own); reactivated, cleared, and what waited for
  them goes out;
- `tokens_revoked` (the bot's) / `app_uninstalled`, single-token mode: the token is recorded
  refused at once (bot/slack/tokens.py) — calls stop, posts stay queued, a probe finds a new
  token. (With OAuth the installation is stopped before the gate: bot/slack/tenancy.py.)

A listener parses and calls one thing: the fallbacks, then a delivery pass. Unknown shapes are
acked and ignored (Slack sends many `user_change`s: a profile edit changes nothing here).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from slack_bolt.async_app import AsyncApp
from slack_bolt.context.async_context import AsyncBoltContext

from bot.slack.errors import answering
from bot.slack.tokens import Tokens, fingerprint
from bot.slack.unreachable import COMES_BACK, Fallbacks, PostPending

log = logging.getLogger(__name__)

# Slack's event → (what it says about the channel, the record codes it undoes).
_CHANNEL_GONE = {"channel_archive": "is_archived", "member_left_channel": "not_in_channel"}
_CHANNEL_BACK = {"channel_unarchive": frozenset({"is_archived"}),
                 "member_joined_channel": frozenset({"not_in_channel"})}
_OWN = frozenset({"member_left_channel", "member_joined_channel"})  # about the bot only
KINDS = (*_CHANNEL_GONE, *_CHANNEL_BACK, "user_change", "tokens_revoked", "app_uninstalled")


@dataclass
class Signals:
    fallbacks: Fallbacks
    post_pending: PostPending  # a pending request's card, posted (the notifier)
    deliver: Callable[[], Awaitable[None]]  # a delivery pass (the notifier)
    tokens: Tokens | None = None  # single-token mode's refused tokens
    token: Callable[[], str | None] = lambda: None  # the bot token now (single-token mode)

    def register(self, app: AsyncApp, *, oauth: bool) -> None:
        # Closures, not bound methods: `answering` injects the names a listener declares.
        async def channel_signal(event: dict[str, Any], context: AsyncBoltContext) -> None:
            await self._channel(event, context)

        async def user_signal(event: dict[str, Any]) -> None:
            await self._user(event)

        async def token_signal(event: dict[str, Any]) -> None:
            self._revoked(event)

        for kind in (*_CHANNEL_GONE, *_CHANNEL_BACK):
            app.event(kind)(answering(channel_signal))
        app.event("user_change")(answering(user_signal))
        if not oauth:  # with OAuth, bot/slack/tenancy.py stops the installation first
            for kind in ("tokens_revoked", "app_uninstalled"):
                app.event(kind)(answering(token_signal))

    async def _channel(self, event: dict[str, Any], context: AsyncBoltContext) -> None:
        kind, channel = str(event.get("type")), event.get("channel")
        if not isinstance(channel, str) or not channel:
            return
        if kind in _OWN and event.get("user") != _bot_user(context):
            return  # another member: the bot's own reach is unchanged
        if kind in _CHANNEL_GONE:
            await self.fallbacks.said_gone(channel, _CHANNEL_GONE[kind])
        elif await self.fallbacks.said_back(channel, _CHANNEL_BACK[kind], self.post_pending):
            await self.deliver()

    async def _user(self, event: dict[str, Any]) -> None:
        user = event.get("user")
        if not isinstance(user, dict) or not isinstance(user.get("id"), str) \
                or not isinstance(user.get("deleted"), bool):
            return
        if user["deleted"]:
            await self.fallbacks.said_gone(user["id"], "user_disabled")
        elif await self.fallbacks.said_back(user["id"], COMES_BACK, self.post_pending):
            await self.deliver()

    def _revoked(self, event: dict[str, Any]) -> None:
        if event.get("type") == "tokens_revoked" and not (event.get("tokens") or {}).get("bot"):
            return  # only people's tokens: the bot holds none
        token = self.token()
        if self.tokens is not None and token:
            self.tokens.refuse(fingerprint(token), "token_revoked")


def _bot_user(context: AsyncBoltContext) -> str | None:
    """The bot's own user id: Bolt's (from the authorization), else the event's."""
    if context.bot_user_id:
        return context.bot_user_id
    for found in (context.authorize_result and [context.authorize_result]) or []:
        return found.bot_user_id
    return None
