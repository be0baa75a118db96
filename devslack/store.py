"""What FakeSlack remembers: people, channels, messages, views, and the ids Slack hands out.

Pure state driven by a `Clock`; no HTTP here. Web API semantics live in `methods.py`, the
server in `webapi.py`. Query helpers (`messages`, `thread`, `ephemerals`, …) are what tests read.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any

from bot.clock import Clock
from devslack.blockkit import Button, buttons, with_ids
from devslack.models import (
    Message,
    MessageVersion,
    ResponseTarget,
    SlackError,
    SlackUser,
    Trigger,
    Violation,
)

TRIGGER_LIFETIME = timedelta(seconds=3)
MODAL_STACK_LIMIT = 3


class SlackStore:
    """The fake workspace's memory and the rules Slack enforces on it."""

    def __init__(
        self,
        *,
        clock: Clock,
        team_id: str,
        team_domain: str,
        bot_name: str,
        bot_user_id: str,
        bot_id: str,
        app_id: str,
        users: Iterable[SlackUser],
        channels: Mapping[str, str],
    ) -> None:
        self.clock = clock
        self.team_id = team_id
        self.team_domain = team_domain
        self.bot_name = bot_name
        self.bot_user_id = bot_user_id
        self.bot_id = bot_id
        self.app_id = app_id
        self.users: dict[str, SlackUser] = {u.id: u for u in users}
        self.usergroups: dict[str, list[str]] = {}  # S… id → member user ids
        self.channels: dict[str, str] = dict(channels)  # id → name
        self._messages: dict[str, list[Message]] = {}
        self._views: dict[str, dict[str, Any]] = {}
        self._view_owner: dict[str, str] = {}
        self._stacks: dict[str, list[str]] = {}  # user → open modal ids, root first
        self._last_modal: dict[str, str] = {}
        self._homes: dict[str, str] = {}
        self._triggers: dict[str, Trigger] = {}
        self.response_targets: dict[str, ResponseTarget] = {}
        self.violations: list[Violation] = []  # payloads Slack would have refused
        self.scheduled: dict[str, tuple[datetime, dict[str, Any]]] = {}  # chat.scheduleMessage
        self._serial = itertools.count(1)
        self._ts_seconds = 0

    # -- ids ---------------------------------------------------------------------------------

    def next_ts(self) -> str:
        """A message ts: epoch seconds by the clock, then a sequence that never repeats."""
        self._ts_seconds = max(self._ts_seconds, int(self.clock.now().timestamp()))
        return f"{self._ts_seconds}.{next(self._serial) % 1_000_000:06d}"

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}{next(self._serial):08X}"

    # -- people and places -------------------------------------------------------------------

    def user(self, ref: str) -> SlackUser:
        """A user by id or name (`alice`, `@alice`, `U0ALICE`)."""
        key = ref.removeprefix("@")
        found = self.users.get(key) or next((u for u in self.users.values() if u.name == key), None)
        if found is None:
            raise SlackError("user_not_found", ref)
        return found

    def add_channel(self, name: str, channel_id: str | None = None) -> str:
        name = name.removeprefix("#")
        for known_id, known in self.channels.items():
            if known == name:
                return known_id
        new_id = channel_id or self._new_id("C")
        self.channels[new_id] = name
        return new_id

    def dm_channel(self, user_id: str) -> str:
        """The stable DM id between the bot and `user_id` (what conversations.open returns)."""
        return "D" + self.user(user_id).id[1:]

    def dm_user(self, channel_id: str) -> str | None:
        if channel_id.startswith("D"):
            return next((u for u in self.users if u[1:] == channel_id[1:]), None)
        return None

    def resolve_channel(self, ref: str) -> str:
        """A channel id from an id, `#name`, `name`, or a user id (meaning that user's DM)."""
        if ref in self.channels or self.dm_user(ref) is not None:
            return ref
        if ref[:1] in ("U", "W") and ref in self.users:
            return self.dm_channel(ref)
        name = ref.removeprefix("#")
        for channel_id, known in self.channels.items():
            if known == name:
                return channel_id
        raise SlackError("channel_not_found", ref)

    def channel_name(self, channel_id: str) -> str:
        return self.channels.get(channel_id) or "directmessage"

    # -- messages ----------------------------------------------------------------------------

    def post(
        self,
        *,
        channel: str,
        text: str,
        blocks: list[dict[str, Any]],
        via: str,
        thread_ts: str | None = None,
        reply_broadcast: bool = False,
        ephemeral_to: str | None = None,
        extra: dict[str, Any] | None = None,
    ) -> Message:
        message = Message(
            channel=channel,
            ts=self.next_ts(),
            text=text,
            blocks=with_ids(blocks),
            user=self.bot_user_id,
            posted_at=self.clock.now(),
            via=via,
            thread_ts=thread_ts,
            reply_broadcast=reply_broadcast,
            ephemeral_to=ephemeral_to,
            extra=extra or {},
        )
        self._messages.setdefault(channel, []).append(message)
        return message

    def message(self, channel: str, ts: str) -> Message:
        """A live message; Slack's `message_not_found` when there is none (or it was deleted)."""
        found = self.find_message(channel, ts)
        if found is None or found.deleted:
            raise SlackError("message_not_found", f"{channel}/{ts}")
        return found

    def find_message(self, channel: str, ts: str) -> Message | None:
        """The message at (channel, ts), deleted ones included."""
        return next((m for m in self._messages.get(channel, []) if m.ts == ts), None)

    def edit(
        self, message: Message, *, text: str | None, blocks: list[dict[str, Any]] | None
    ) -> None:
        """Replace a message's content, keeping what it said before in `edits`."""
        now = self.clock.now()
        message.edits.append(MessageVersion(message.text, message.blocks, now))
        if text is not None:
            message.text = text
        if blocks is not None:
            message.blocks = with_ids(blocks)
        message.edited_ts = self.next_ts()

    # -- queries (what tests read) -----------------------------------------------------------

    def messages(self, channel: str) -> list[Message]:
        """A channel's visible history: top-level messages and broadcast replies, oldest first."""
        channel_id = self.resolve_channel(channel)
        return [
            m
            for m in self._messages.get(channel_id, [])
            if not m.deleted and m.ephemeral_to is None and (not m.is_reply or m.reply_broadcast)
        ]

    def thread(self, channel: str, ts: str) -> list[Message]:
        """A thread: its parent then every reply, oldest first."""
        channel_id = self.resolve_channel(channel)
        return [
            m
            for m in self._messages.get(channel_id, [])
            if not m.deleted and m.ephemeral_to is None and ts in (m.ts, m.thread_ts)
        ]

    def ephemerals(self, user: str) -> list[Message]:
        """Every ephemeral message shown to `user`, in any channel, oldest first."""
        user_id = self.user(user).id
        found = [m for ms in self._messages.values() for m in ms if m.ephemeral_to == user_id]
        return sorted((m for m in found if not m.deleted), key=lambda m: float(m.ts))

    def dms(self, user: str) -> list[Message]:
        """The bot's direct messages to `user` (threads included), oldest first."""
        channel_id = self.dm_channel(self.user(user).id)
        return [
            m
            for m in self._messages.get(channel_id, [])
            if not m.deleted and m.ephemeral_to is None
        ]

    def seen_by(self, channel: str, user_id: str) -> list[Message]:
        """Every message `user_id` can see in `channel` — threads and their own ephemeral
        replies included — in the order they were posted (the browser workspace's view)."""
        return [m for m in self._messages.get(channel, [])
                if not m.deleted and m.ephemeral_to in (None, user_id)]

    def all_messages(self) -> list[Message]:
        """Everything ever posted, deleted and ephemeral included, oldest first."""
        every = (m for ms in self._messages.values() for m in ms)
        return sorted(every, key=lambda m: float(m.ts))

    @staticmethod
    def find_buttons(surface: Message | Mapping[str, Any]) -> list[Button]:
        """The buttons of a message or a view (or any dict with `blocks`), in reading order."""
        blocks = surface.blocks if isinstance(surface, Message) else surface.get("blocks") or []
        return buttons(blocks)

    # -- triggers and response_urls ----------------------------------------------------------

    def issue_trigger_id(self, user_id: str, team_id: str | None = None) -> str:
        now = self.clock.now()
        trigger_id = f"{int(now.timestamp())}.{next(self._serial)}.devslack"
        self._triggers[trigger_id] = Trigger(user_id=user_id, issued=now, team_id=team_id)
        return trigger_id

    def trigger_team(self, trigger_id: object) -> str | None:
        """The workspace a trigger_id's request came from (a view opens there)."""
        trigger = self._triggers.get(str(trigger_id))
        return None if trigger is None else trigger.team_id

    def redeem_trigger(self, trigger_id: object) -> str:
        """The user a trigger_id was issued to; a trigger works once, within 3 s."""
        trigger = self._triggers.get(str(trigger_id))
        if trigger is None:
            raise SlackError("invalid_trigger_id", str(trigger_id))
        if trigger.used:
            raise SlackError("exchanged_trigger_id")
        if self.clock.now() - trigger.issued > TRIGGER_LIFETIME:
            raise SlackError("expired_trigger_id")
        trigger.used = True
        return trigger.user_id

    def new_response_target(self, target: ResponseTarget) -> str:
        response_id = f"{next(self._serial):08d}"
        self.response_targets[response_id] = target
        return response_id

    # -- views -------------------------------------------------------------------------------

    def view(self, view_id: str) -> dict[str, Any]:
        found = self._views.get(view_id)
        if found is None:
            raise SlackError("not_found", view_id)
        return found

    def has_view(self, view_id: str) -> bool:
        return view_id in self._views

    def view_owner(self, view_id: str) -> str:
        return self._view_owner[self.view(view_id)["id"]]

    def find_view(self, *, view_id: object = None, external_id: object = None) -> dict[str, Any]:
        if view_id:
            return self.view(str(view_id))
        for view in self._views.values():
            if external_id and view.get("external_id") == external_id:
                return view
        raise SlackError("not_found", str(view_id or external_id))

    def current_modal(self, user: str) -> dict[str, Any] | None:
        """The modal on top of `user`'s stack (what they see now), or None."""
        stack = self._stacks.get(self.user(user).id) or []
        return self._views[stack[-1]] if stack else None

    def is_open(self, view_id: str) -> bool:
        owner = self._view_owner.get(view_id)
        return owner is not None and (
            view_id in self._stacks.get(owner, []) or self._homes.get(owner) == view_id
        )

    def last_view(self, user: str) -> dict[str, Any] | None:
        """The modal most recently opened, pushed or updated for `user` (open or not)."""
        view_id = self._last_modal.get(self.user(user).id)
        return None if view_id is None else self._views[view_id]

    def home(self, user: str) -> dict[str, Any] | None:
        """The App Home view published for `user`, or None."""
        view_id = self._homes.get(self.user(user).id)
        return None if view_id is None else self._views[view_id]

    def add_view(
        self, user_id: str, view: Mapping[str, Any], *, push: bool = False
    ) -> dict[str, Any]:
        """Open (or push) a modal for `user_id`; the stack holds at most three."""
        if view.get("external_id") and any(
            v.get("external_id") == view["external_id"] for v in self._views.values()
        ):
            raise SlackError("duplicate_external_id", str(view["external_id"]))
        stack = self._stacks.setdefault(user_id, []) if push else []
        if push and not stack:
            raise SlackError("not_found", "no open modal to push onto")
        if len(stack) >= MODAL_STACK_LIMIT:
            raise SlackError("push_limit_reached")
        view_id = self._new_id("V")
        root = stack[0] if stack else view_id
        previous = stack[-1] if stack else None
        full = self._materialize(view, view_id=view_id, root=root, previous=previous)
        self._views[view_id] = full
        self._view_owner[view_id] = user_id
        self._stacks[user_id] = [*stack, view_id]
        self._last_modal[user_id] = view_id
        return full

    def replace_view(
        self, view_id: str, view: Mapping[str, Any], *, hash: object = None
    ) -> dict[str, Any]:
        """`views.update` (and `response_action: update`): same id, new content, new hash."""
        current = self.view(view_id)
        if not self.is_open(view_id):
            raise SlackError("not_found", f"{view_id} is closed")
        if hash and hash != current["hash"]:
            raise SlackError("hash_conflict")
        full = self._materialize(
            view,
            view_id=view_id,
            root=current["root_view_id"],
            previous=current["previous_view_id"],
        )
        self._views[view_id] = full
        if current["type"] == "modal":
            self._last_modal[self._view_owner[view_id]] = view_id
        return full

    def publish_home(
        self, user_id: str, view: Mapping[str, Any], *, hash: object = None
    ) -> dict[str, Any]:
        existing = self._homes.get(user_id)
        if existing is not None:
            return self.replace_view(existing, view, hash=hash)
        view_id = self._new_id("V")
        full = self._materialize(view, view_id=view_id, root=view_id, previous=None)
        self._views[view_id] = full
        self._view_owner[view_id] = user_id
        self._homes[user_id] = view_id
        return full

    def close_modal(self, view_id: str, *, everything: bool = False) -> None:
        """Close a modal (and the ones pushed above it); `everything` clears the whole stack."""
        owner = self._view_owner.get(view_id)
        stack = self._stacks.get(owner or "", [])
        if view_id in stack:
            self._stacks[owner or ""] = [] if everything else stack[: stack.index(view_id)]

    def _materialize(
        self, view: Mapping[str, Any], *, view_id: str, root: str, previous: str | None
    ) -> dict[str, Any]:
        """The view object Slack answers with: the app's view plus the fields Slack owns."""
        now = self.clock.now()
        return {
            "id": view_id,
            "team_id": self.team_id,
            "type": view.get("type"),
            "blocks": with_ids(view.get("blocks") or []),
            "private_metadata": view.get("private_metadata", ""),
            "callback_id": view.get("callback_id", ""),
            "state": {"values": {}},
            "hash": f"{int(now.timestamp())}.{next(self._serial):08x}",
            "title": copy.deepcopy(view.get("title")),
            "clear_on_close": bool(view.get("clear_on_close", False)),
            "notify_on_close": bool(view.get("notify_on_close", False)),
            "close": copy.deepcopy(view.get("close")),
            "submit": copy.deepcopy(view.get("submit")),
            "previous_view_id": previous,
            "root_view_id": root,
            "app_id": self.app_id,
            "external_id": view.get("external_id", ""),
            "app_installed_team_id": self.team_id,
            "bot_id": self.bot_id,
        }
