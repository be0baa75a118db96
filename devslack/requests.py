"""`SlackRequests`: what Slack sends to the bot's Request URL — real payloads, signed.

Shapes follow Slack's docs and bolt-python's own test payloads: slash commands are form fields;
interactivity is one form field `payload` holding JSON; events are a JSON `event_callback`
envelope. Every request carries `X-Slack-Request-Timestamp` and a v0 HMAC-SHA256 signature of
`v0:{timestamp}:{raw body}`. trigger_ids and response_urls are minted by the `FakeSlack`
they will be redeemed at, so `views.open` and `respond()` behave as in Slack.

After the bot answers, Slack acts on the ack and so does this client: a slash command's ack
body is shown to the invoker, a view_submission's ack closes / updates / pushes the modal or
shows its errors. An ack slower than 3 s is dropped, as Slack drops it.

Where a request comes from: the workspace `team_id`; in an Enterprise Grid organization its
`enterprise_id` too, and `enterprise_install` when the app is installed org-wide (Slack's
`is_enterprise_install`); `user_team_id`, the person's own workspace when it is another (a Slack
Connect guest in a shared channel).
"""

from __future__ import annotations

import itertools
import json
import secrets
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

import aiohttp
from slack_sdk.signature import SignatureVerifier

from bot.clock import Clock, SystemClock
from devslack.blockkit import action_entry, typed_state
from devslack.closing import Closing
from devslack.models import Message, SlackError
from devslack.reply import Reply
from devslack.webapi import FakeSlack

FORM = "application/x-www-form-urlencoded"
LEGACY_TOKEN = "devslack-verification-token"  # deprecated field; bots must not check it


def signed_headers(
    body: bytes, *, secret: str, timestamp: int, content_type: str = FORM
) -> dict[str, str]:
    """The headers Slack sends with `body`: content type, timestamp and v0 signature."""
    signature = SignatureVerifier(secret).generate_signature(timestamp=str(timestamp), body=body)
    if signature is None:  # the SDK answers None only for a missing body or timestamp
        raise ValueError("nothing to sign")
    return {
        "Content-Type": content_type,
        "X-Slack-Request-Timestamp": str(timestamp),
        "X-Slack-Signature": signature,
    }


class SlackRequests(Closing):
    """A client for the bot's `/slack/events` that speaks exactly as Slack does."""

    def __init__(
        self,
        *,
        events_url: str,
        signing_secret: str,
        slack: FakeSlack,
        team_id: str | None = None,
        enterprise_id: str | None = None,
        enterprise_install: bool = False,
        user_team_id: str | None = None,
        clock: Clock | None = None,
        session: aiohttp.ClientSession | None = None,
    ) -> None:
        self.events_url = events_url
        self.signing_secret = signing_secret
        self.slack = slack
        self.team_id = team_id or slack.team_id
        self.enterprise_id = enterprise_id
        self.enterprise_install = enterprise_install
        self.user_team_id = user_team_id or self.team_id
        # Bolt checks the timestamp against the real wall clock, hence SystemClock by default.
        self._clock = clock or SystemClock()
        self._session = session
        self._owns_session = session is None
        # Slack's event_ids are unique in the workspace: so are these, across the clients of
        # one test (replicas, restarts) — the bot deduplicates deliveries by event_id.
        self._event_prefix = secrets.token_hex(3).upper()
        self._event_ids = itertools.count(1)
        self._last: tuple[bytes, dict[str, str]] | None = None  # for resend()

    async def aclose(self) -> None:
        if self._owns_session and self._session is not None:
            await self._session.close()
            self._session = None

    # -- slash commands ----------------------------------------------------------------------

    async def slash(
        self,
        command: str = "/cluster",
        text: str = "",
        *,
        user_id: str,
        channel_id: str | None = None,
    ) -> Reply:
        """Type `command text` as `user_id` in `channel_id` (default: the first channel)."""
        channel = self.slack.resolve_channel(channel_id or next(iter(self.slack.channels)))
        user = self._user(user_id)
        response_url = self.slack.issue_response_url(
            channel_id=channel, user_id=user["id"], awaits_ack=True
        )
        form = {
            "token": LEGACY_TOKEN,
            "team_id": self.team_id,
            "team_domain": self.slack.team_domain,
            "channel_id": channel,
            "channel_name": self.slack.channel_name(channel),
            "user_id": user["id"],
            "user_name": user["name"],
            "command": command,
            "text": text,
            "api_app_id": self.slack.app_id,
            **({"enterprise_id": self.enterprise_id, "enterprise_name": self._org["name"]}
               if self._org else {}),
            "is_enterprise_install": str(self.enterprise_install).lower(),
            "response_url": response_url,
            "trigger_id": self.slack.issue_trigger_id(user["id"], self.team_id),
        }
        reply: Reply | None = None
        try:
            reply = await self._command(form)
        finally:  # even when the request failed: respond() calls are waiting on this
            shown = None
            if reply is not None and reply.status == 200 and not reply.timed_out:
                shown = reply.content
            self.slack.apply_command_ack(response_url, shown)
        return reply

    # -- interactivity -----------------------------------------------------------------------

    async def click(
        self,
        message_or_view: Message | Mapping[str, Any],
        action_id: str,
        *,
        user_id: str,
        value: Any = None,
        block_id: str | None = None,
        channel_id: str | None = None,
        values: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> Reply:
        """Click (or pick a value in) the element `action_id` of a message or a view.

        `value` overrides a button's value, or chooses what a select / picker submits;
        `values` (`{block_id: {action_id: value}}`) is what was typed into the surface's inputs
        so far, sent in its `state` as Slack does (inputs left out keep their initial value).
        """
        user = self._user(user_id)
        payload: dict[str, Any] = {
            "type": "block_actions",
            "user": user,
            "api_app_id": self.slack.app_id,
            "token": LEGACY_TOKEN,
            "trigger_id": self.slack.issue_trigger_id(user["id"], self.team_id),
            "team": {"id": self.team_id, "domain": self.slack.team_domain},
            "enterprise": self._org,
            "is_enterprise_install": self.enterprise_install,
        }
        view = self._as_view(message_or_view)
        if view is not None:
            blocks = view["blocks"]
            payload["container"] = {"type": "view", "view_id": view["id"]}
            payload["view"] = {**view, "state": {"values": typed_state(blocks, values)}}
        else:
            message = self._as_message(message_or_view, channel_id)
            blocks = message.blocks
            payload.update(self._message_context(message, user["id"]))
            payload["state"] = {"values": typed_state(blocks, values)}
        payload["actions"] = [
            action_entry(blocks, action_id, block_id, value, self.slack.next_ts())
        ]
        return await self._interactive(payload)

    async def submit_view(
        self,
        view: Mapping[str, Any] | str,
        *,
        user_id: str,
        values: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> Reply:
        """Press Submit on a modal with `values = {block_id: {action_id: value}}`.

        Inputs left out keep their initial value. Returns the ack, so a test sees
        `response_action: errors`; the ack is applied to the modal stack as Slack would.
        """
        current = self._as_view(view if isinstance(view, Mapping) else {"id": view})
        if current is None:
            raise ValueError(f"not a view: {view!r}")
        state = typed_state(current["blocks"], values)
        payload: dict[str, Any] = {
            "type": "view_submission",
            "team": {"id": self.team_id, "domain": self.slack.team_domain},
            "user": self._user(user_id),
            "api_app_id": self.slack.app_id,
            "token": LEGACY_TOKEN,
            "trigger_id": self.slack.issue_trigger_id(user_id, self.team_id),
            "view": {**current, "state": {"values": state}},
            "response_urls": [],
            "enterprise": self._org,
            "is_enterprise_install": self.enterprise_install,
        }
        reply = await self._interactive(payload)
        if reply.status == 200 and not reply.timed_out and self.slack.has_view(current["id"]):
            self.slack.apply_view_ack(current["id"], reply.content)
        return reply

    async def close_view(self, view: Mapping[str, Any] | str, *, user_id: str) -> Reply | None:
        """Dismiss a modal; the bot hears `view_closed` only if the view asked to be notified."""
        current = self._as_view(view if isinstance(view, Mapping) else {"id": view})
        if current is None:
            raise ValueError(f"not a view: {view!r}")
        self.slack.close_view(current["id"])
        if not current.get("notify_on_close"):
            return None
        return await self._interactive(
            {
                "type": "view_closed",
                "team": {"id": self.team_id, "domain": self.slack.team_domain},
                "user": self._user(user_id),
                "api_app_id": self.slack.app_id,
                "token": LEGACY_TOKEN,
                "view": current,
                "is_cleared": bool(current.get("clear_on_close")),
                "enterprise": self._org,
                "is_enterprise_install": self.enterprise_install,
            }
        )

    # -- Events API --------------------------------------------------------------------------

    async def event(
        self,
        event: Mapping[str, Any],
        *,
        event_id: str | None = None,
        retry_num: int | None = None,
        retry_reason: str = "http_timeout",
    ) -> Reply:
        """Deliver `event` in an `event_callback` envelope (a retry if `retry_num` is set)."""
        now = int(self._clock.now().timestamp())
        envelope = {
            "token": LEGACY_TOKEN,
            "team_id": self.team_id,
            **({"enterprise_id": self.enterprise_id} if self.enterprise_id else {}),
            "api_app_id": self.slack.app_id,
            "event": {"event_ts": f"{now}.000100", **event},
            "type": "event_callback",
            "event_id": event_id or f"Ev{self._event_prefix}{next(self._event_ids):05d}",
            "event_time": now,
            "authorizations": [
                {
                    "enterprise_id": self.enterprise_id,
                    "team_id": None if self.enterprise_install else self.team_id,
                    "user_id": self.slack.bot_user_id,
                    "is_bot": True,
                    "is_enterprise_install": self.enterprise_install,
                }
            ],
            "is_ext_shared_channel": False,
            "event_context": f"4-devslack-{self.team_id}",
        }
        return await self._event(envelope, retry_num=retry_num, retry_reason=retry_reason)

    async def app_home_opened(self, user_id: str) -> Reply:
        """The user opened the app's Home tab."""
        event: dict[str, Any] = {
            "type": "app_home_opened",
            "user": user_id,
            "channel": self.slack.dm_channel(user_id),
            "tab": "home",
        }
        home = self.slack.home(user_id)
        if home is not None:
            event["view"] = home
        return await self.event(event)

    async def url_verification(self, challenge: str = "devslack-challenge") -> Reply:
        body = {"token": LEGACY_TOKEN, "challenge": challenge, "type": "url_verification"}
        return await self.send(json.dumps(body).encode(), content_type="application/json")

    # -- the wire ----------------------------------------------------------------------------

    async def send(
        self, body: bytes, *, content_type: str, extra: Mapping[str, str] | None = None
    ) -> Reply:
        """POST `body` signed with the signing secret and the clock's timestamp."""
        timestamp = int(self._clock.now().timestamp())
        headers = signed_headers(
            body, secret=self.signing_secret, timestamp=timestamp, content_type=content_type
        )
        return await self.raw(body, {**headers, **(extra or {})})

    async def resend(self, *, retry_num: int = 1, retry_reason: str = "http_timeout") -> Reply:
        """POST the last request again, bytes and signature unchanged, as a retrying proxy
        does: with `X-Slack-Retry-Num` / `X-Slack-Retry-Reason`."""
        if self._last is None:
            raise RuntimeError("nothing was sent over HTTP yet")
        body, headers = self._last
        return await self.raw(body, {**headers, "X-Slack-Retry-Num": str(retry_num),
                                     "X-Slack-Retry-Reason": retry_reason})

    async def raw(self, body: bytes, headers: Mapping[str, str]) -> Reply:
        """POST exactly these bytes and headers (forged, unsigned, stale, malformed…)."""
        self._last = (body, dict(headers))
        if self._session is None:
            self._session = aiohttp.ClientSession()
        started = time.perf_counter()
        # in flight for FakeSlack.settle: the bot may call back while (or just after) answering
        with self.slack.activity():
            async with self._session.post(
                self.events_url, data=body, headers=dict(headers)
            ) as resp:
                text = await resp.text()
                return Reply(resp.status, text, resp.content_type, time.perf_counter() - started)

    # How each kind of request travels: over HTTP here; `SocketRequests` sends envelopes.

    async def _command(self, form: Mapping[str, str]) -> Reply:
        return await self.send(urlencode(form).encode(), content_type=FORM)

    async def _interactive(self, payload: Mapping[str, Any]) -> Reply:
        return await self.send(
            urlencode({"payload": json.dumps(payload)}).encode(), content_type=FORM
        )

    async def _event(
        self, envelope: Mapping[str, Any], *, retry_num: int | None, retry_reason: str
    ) -> Reply:
        extra = {}
        if retry_num is not None:
            extra = {"X-Slack-Retry-Num": str(retry_num), "X-Slack-Retry-Reason": retry_reason}
        return await self.send(
            json.dumps(envelope).encode(), content_type="application/json", extra=extra
        )

    # -- helpers -----------------------------------------------------------------------------

    @property
    def _org(self) -> dict[str, str] | None:
        """An interactive payload's `enterprise` object (None outside an organization)."""
        if self.enterprise_id is None:
            return None
        return {"id": self.enterprise_id, "name": f"{self.enterprise_id} org"}

    def _user(self, user_id: str) -> dict[str, Any]:
        """The `user` object of a payload; unknown ids pass through for forged-request tests."""
        try:
            user = self.slack.user(user_id)
        except SlackError:
            return {"id": user_id, "username": user_id, "name": user_id,
                    "team_id": self.user_team_id}
        return {"id": user.id, "username": user.name, "name": user.name,
                "team_id": self.user_team_id}

    def _as_view(self, surface: Message | Mapping[str, Any]) -> dict[str, Any] | None:
        """The view a surface names, FakeSlack's current copy when it knows it."""
        if isinstance(surface, Message):
            return None
        view_id = surface.get("id")
        if isinstance(view_id, str) and self.slack.has_view(view_id):
            return self.slack.view(view_id)
        if surface.get("type") in ("modal", "home"):
            return dict(surface)
        return None

    def _as_message(self, surface: Message | Mapping[str, Any], channel_id: str | None) -> Message:
        if isinstance(surface, Message):
            return surface
        channel = surface.get("channel") or channel_id
        if not channel or not surface.get("ts"):
            raise ValueError("a message dict needs `ts` and `channel` (or pass channel_id=)")
        return self.slack.message(self.slack.resolve_channel(str(channel)), str(surface["ts"]))

    def _message_context(self, message: Message, user_id: str) -> dict[str, Any]:
        """container, channel, message and response_url of a click on a message."""
        ephemeral = message.ephemeral_to is not None
        container: dict[str, Any] = {
            "type": "message",
            "message_ts": message.ts,
            "channel_id": message.channel,
            "is_ephemeral": ephemeral,
        }
        if message.thread_ts is not None:
            container["thread_ts"] = message.thread_ts
        context: dict[str, Any] = {
            "container": container,
            "channel": {"id": message.channel, "name": self.slack.channel_name(message.channel)},
            "response_url": self.slack.issue_response_url(
                channel_id=message.channel, user_id=user_id, message_ts=message.ts
            ),
        }
        if not ephemeral:  # Slack does not echo ephemeral messages back
            context["message"] = self.slack.message_body(message)
        return context
