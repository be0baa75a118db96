"""What the terminal shows: every FakeSlack call that changes what someone sees, as text.

`Screen` subscribes to FakeSlack's calls, so the bot's output appears as it happens — also
when the bot posts long after an ack. It numbers every button it prints and remembers where
each number points, for `press N`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TextIO

from devslack.blockkit import plain
from devslack.models import ApiCall, Message, SlackError
from devslack.render import Labeller, blocks_to_lines, element_label, mrkdwn, text_of
from devslack.webapi import FakeSlack

# calls that change nothing anyone sees
_SILENT = frozenset(
    {
        "api.test",
        "auth.test",
        "conversations.info",
        "conversations.open",
        "users.info",
        "users.lookupByEmail",
        "chat.deleteScheduledMessage",
    }
)


@dataclass(frozen=True)
class ButtonRef:
    """Where a printed button number points: a message (channel, ts) or a view."""

    block_id: str
    action_id: str
    channel: str | None = None
    ts: str | None = None
    view_id: str | None = None
    label: str = ""  # the button's text as shown, for `press LABEL`


class Screen:
    """Renders FakeSlack's calls to a text stream and numbers the buttons it shows."""

    def __init__(self, slack: FakeSlack, output: TextIO) -> None:
        self.slack = slack
        self._out = output
        self.buttons: dict[int, ButtonRef] = {}

    def say(self, text: str = "") -> None:
        self._out.write(text + "\n")
        self._out.flush()

    def write(self, text: str) -> None:
        self._out.write(text)
        self._out.flush()

    def name(self, some_id: str) -> str:
        """A person's or channel's readable name for an id (the id itself if unknown)."""
        if some_id in self.slack.users:
            return self.slack.users[some_id].name
        if some_id in self.slack.channels:
            return self.slack.channels[some_id]
        return some_id

    def text(self, raw: str) -> str:
        return mrkdwn(raw, self.name)

    # -- the subscription --------------------------------------------------------------------

    def on_call(self, call: ApiCall) -> None:
        """FakeSlack subscriber: print what `call` changed for the people in the workspace."""
        if not call.ok:
            detail = call.response.get("detail")
            self.say(
                f"⚠ the bot's {call.method} failed: {call.error}"
                + (f" ({detail})" if detail else "")
            )
            return
        if call.method in _SILENT:
            return
        response = call.response
        if call.method == "ack" and "errors" in response:
            return  # the form prompt shows them next to each field
        if "view" in response:
            self.show_view(response["view"])
        elif call.method == "chat.scheduleMessage":
            where = self.where(str(response.get("channel")))
            self.say(f"⏰ scheduled for {response.get('post_at')} in {where}")
        elif call.method == "files.completeUploadExternal":
            where = self.where(str(call.args.get("channel_id") or "?"))
            for f in response.get("files") or []:
                kind = str(f.get("filetype") or "file").upper()  # the file's own: CSV, PNG …
                self.say(f"📎 {where}: file {f.get('title')} ({f.get('size')} bytes, {kind})")
        elif call.method == "chat.delete":
            self.say(f"✗ {self.where(str(response['channel']))}: message {response['ts']} deleted")
        else:
            self._show_message_call(call)

    def _show_message_call(self, call: ApiCall) -> None:
        response = call.response
        ts = response.get("ts") or response.get("message_ts")
        channel = response.get("channel") or call.args.get("channel")
        if not ts or not channel:
            return
        try:
            found = self.slack.find_message(self.slack.resolve_channel(str(channel)), str(ts))
        except SlackError:
            found = None
        if found is None:
            return
        if response.get("deleted"):
            self.say(f"✗ {self.where(found.channel)}: message {found.ts} deleted")
            return
        self.show_message(
            found, edited=call.method == "chat.update" or bool(response.get("edited"))
        )

    # -- surfaces ----------------------------------------------------------------------------

    def where(self, channel: str) -> str:
        dm_user = self.slack.dm_user(channel)
        if dm_user is not None:
            return f"DM to @{self.name(dm_user)}"
        return "#" + self.slack.channel_name(channel)

    def show_message(self, message: Message, *, edited: bool = False) -> None:
        place = self.where(message.channel)
        if message.is_reply:
            place += f" › thread {message.thread_ts}"
        tags = []
        if edited:
            tags.append("✎ edited")
        if message.ephemeral_to is not None:
            tags.append(f"only visible to @{self.name(message.ephemeral_to)}")
        if message.reply_broadcast:
            tags.append("also sent to the channel")
        suffix = f" ({'; '.join(tags)})" if tags else ""
        self.say(f"{place} · {self.slack.bot_name}{suffix}:")
        label = self._labeller(channel=message.channel, ts=message.ts)
        if message.blocks:
            lines = blocks_to_lines(message.blocks, label=label, names=self.name)
        else:
            lines = ["  " + line for line in self.text(message.text).splitlines()]
        for line in lines:
            self.say(line)

    def show_view(self, view: Mapping[str, Any]) -> None:
        owner = self.name(self.slack.view_owner(str(view["id"])))
        if view.get("type") == "home":
            self.say(f"┌ App Home of @{owner}")
        else:
            self.say(f"┌ modal “{plain(view.get('title'))}” for @{owner}")
        label = self._labeller(view_id=str(view["id"]))
        for line in blocks_to_lines(view.get("blocks") or [], label=label, names=self.name):
            self.say("│" + line)
        if view.get("type") == "home":
            self.say("└")
            return
        submit = plain(view.get("submit"))
        close = plain(view.get("close")) or "Cancel"
        self.say("└ " + (f"[{submit}] " if submit else "") + f"[{close}]")

    def _labeller(
        self, *, channel: str | None = None, ts: str | None = None, view_id: str | None = None
    ) -> Labeller:
        def label(block: dict[str, Any], element: dict[str, Any]) -> str:
            if element.get("type") != "button":
                return element_label(element, self.name)
            number = len(self.buttons) + 1
            text = text_of(element.get("text"), self.name)
            self.buttons[number] = ButtonRef(
                block_id=str(block.get("block_id")),
                action_id=str(element.get("action_id")),
                channel=channel,
                ts=ts,
                view_id=view_id,
                label=text,
            )
            style = f" ({element['style']})" if element.get("style") else ""
            return f"[{number}] {text}{style}"

        return label
