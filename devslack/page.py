"""What one person sees in the browser workspace, as HTML fragments the page's script puts in
place: the sidebar (channels, the app's Home and Messages, unread counts), the open channel's
messages (threads folded into "N replies", their own ephemeral replies, shared files, the
workspace's own notes), an open thread, the App Home, and the modal on top of their stack.

A place is a channel id, the person's DM with the app (`D…`), or `home` (the App Home tab).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from devslack.blockkit import plain
from devslack.files import UploadedFile
from devslack.html_blocks import Directory, attr, blocks_html
from devslack.html_text import mrkdwn_html, plain_html
from devslack.models import Message, SlackUser
from devslack.webapi import FakeSlack

HOME = "home"
DM = "dm"  # the person's own DM with the app, whoever they are
IMAGES = frozenset({"png", "jpg", "jpeg", "gif", "svg", "webp"})


@dataclass(frozen=True)
class Note:
    """A line from the workspace itself (a `sim` answer, a refused line), shown to one person
    in one place, at a message ts (where it falls among the messages)."""

    user: str
    place: str
    ts: str
    text: str


@dataclass
class ReadMarks:
    """The newest ts each person has seen in each place: what the sidebar counts as unread."""

    seen: dict[tuple[str, str], float] = field(default_factory=dict)

    def unread(self, user: str, place: str, stamps: Sequence[float]) -> int:
        mark = self.seen.get((user, place), 0.0)
        return sum(1 for stamp in stamps if stamp > mark)

    def read(self, user: str, place: str, stamps: Sequence[float]) -> None:
        if stamps:
            key = (user, place)
            self.seen[key] = max(self.seen.get(key, 0.0), max(stamps))


@dataclass(frozen=True)
class Item:
    """One row of a channel: a message, a shared file or a note, by its ts."""

    ts: str
    html: str


class Page:
    """The fragments for `user` looking at `place` (and `thread`, a message ts there)."""

    def __init__(self, slack: FakeSlack, *, user: SlackUser, notes: Sequence[Note],
                 marks: ReadMarks, file_url: Callable[[str], str]):
        self.slack = slack
        self.user = user
        self.notes = notes
        self.marks = marks
        self.file_url = file_url
        self.directory = Directory(
            names=self._name,
            people=[(u.id, f"{u.name} ({u.real_name or u.name})") for u in slack.users.values()],
            channels=[(cid, f"#{name}") for cid, name in slack.channels.items()],
            file_url=self._known_file,
        )

    def fragments(self, place: str, thread: str | None) -> dict[str, Any]:
        if place == DM:
            place = self._dm()
        if place != HOME and not self._may_see(place):
            place = next(iter(self.slack.channels))
        rows = [] if place == HOME else self._rows(place)
        if place != HOME:
            self.marks.read(self.user.id, place, self._stamps(place))
        return {
            "place": place,
            "sidebar": self._sidebar(place),
            "title": self._title(place),
            "label": (self.slack.bot_name if place in (HOME, self._dm())
                      else f"#{self.slack.channel_name(place)}"),
            "messages": "".join(r.html for r in rows),
            "home": self._home() if place == HOME else "",
            "thread": self._thread(place, thread) if thread and place != HOME else "",
            "modal": self._modal(),
        }

    # -- who and where -----------------------------------------------------------------------

    def _name(self, some_id: str) -> str:
        if some_id in self.slack.users:
            return self.slack.users[some_id].name
        return self.slack.channels.get(some_id, some_id)

    def _known_file(self, file_id: str) -> str | None:
        known = any(f.id == file_id for f in self.slack.uploads.uploaded)
        return self.file_url(file_id) if known else None

    def _may_see(self, place: str) -> bool:
        dm_of = self.slack.dm_user(place)
        return place in self.slack.channels or dm_of == self.user.id

    def _dm(self) -> str:
        return self.slack.dm_channel(self.user.id)

    # -- the sidebar and the title -----------------------------------------------------------

    def _sidebar(self, place: str) -> str:
        links = ['<div class="side-head">Channels</div>']
        for channel_id, name in sorted(self.slack.channels.items(), key=lambda kv: kv[1]):
            links.append(self._link(channel_id, f"# {html.escape(name)}", place))
        links.append(f'<div class="side-head">Apps · {html.escape(self.slack.bot_name)}</div>')
        links.append(self._link(HOME, "🏠 Home", place))
        links.append(self._link(self._dm(), "💬 Messages", place))
        return "".join(links)

    def _link(self, target: str, label: str, place: str) -> str:
        unread = 0
        if target not in (HOME, place):
            unread = self.marks.unread(self.user.id, target, self._stamps(target))
        css = "place" + (" here" if target == place else "") + (" unread" if unread else "")
        badge = f'<span class="badge">{unread}</span>' if unread else ""
        return f'<a class="{css}" data-place="{attr(target)}">{label}{badge}</a>'

    def _title(self, place: str) -> str:
        if place in (HOME, self._dm()):
            tabs = "".join(
                f'<a class="tab{" here" if target == place else ""}" data-place="{attr(target)}">'
                f"{label}</a>" for target, label in ((HOME, "Home"), (self._dm(), "Messages")))
            return f'<span class="app-name">{html.escape(self.slack.bot_name)}</span>{tabs}'
        return f"# {html.escape(self.slack.channel_name(place))}"

    # -- messages ----------------------------------------------------------------------------

    def _stamps(self, place: str) -> list[float]:
        """When each of the place's rows (but the notes) was posted: what unread counts."""
        seen = self.slack.seen_by(place, self.user.id)
        stamps = [float(m.ts) for m in seen if not m.is_reply or m.reply_broadcast]
        stamps += [float(f.ts) for f in self.slack.uploads.shared_in(place)
                   if f.ts and not f.thread_ts]
        return stamps

    def _rows(self, place: str) -> list[Item]:
        """The channel's rows: top-level messages (and replies sent to it too), the files shared
        in it, the person's notes there; oldest first."""
        seen = self.slack.seen_by(place, self.user.id)
        replies: dict[str, int] = {}
        for m in seen:
            if m.is_reply:
                replies[str(m.thread_ts)] = replies.get(str(m.thread_ts), 0) + 1
        rows = [Item(m.ts, self._message(m, replies=replies.get(m.ts, 0)))
                for m in seen if not m.is_reply or m.reply_broadcast]
        rows += [Item(f.ts, self._file(f)) for f in self.slack.uploads.shared_in(place)
                 if f.ts and not f.thread_ts]
        rows += [Item(n.ts, _note(n)) for n in self.notes
                 if n.user == self.user.id and n.place == place]
        return sorted(rows, key=lambda r: float(r.ts))

    def _thread(self, place: str, ts: str) -> str:
        seen = [m for m in self.slack.seen_by(place, self.user.id) if ts in (m.ts, m.thread_ts)]
        if not seen:
            return ""
        rows = [Item(m.ts, self._message(m, replies=0, in_thread=True)) for m in seen]
        rows += [Item(f.ts, self._file(f)) for f in self.slack.uploads.shared_in(place)
                 if f.ts and f.thread_ts == ts]
        body = "".join(r.html for r in sorted(rows, key=lambda r: float(r.ts)))
        return (f'<div class="pane-head">Thread <span class="where">{self._title(place)}</span>'
                f'<button class="x" data-thread-close title="Close">×</button></div>{body}')

    def _message(self, m: Message, *, replies: int, in_thread: bool = False) -> str:
        tags = ""
        if m.edited_ts:
            tags += ' <span class="edited">(edited)</span>'
        if m.is_reply and m.reply_broadcast and not in_thread:
            tags += ' <span class="edited">replied to a thread</span>'
        note = ('<div class="ephemeral">👁 Only visible to you</div>'
                if m.ephemeral_to is not None else "")
        body = (blocks_html(m.blocks, self.directory) if m.blocks
                else f'<div class="text">{mrkdwn_html(m.text, self._name)}</div>')
        thread = ""
        if replies and not in_thread:
            word = "reply" if replies == 1 else "replies"
            thread = f'<a class="replies" data-thread="{attr(m.ts)}">{replies} {word}</a>'
        css = "msg" + (" ephemeral-msg" if m.ephemeral_to is not None else "")
        return (f'<div class="{css}" data-surface="message" data-channel="{attr(m.channel)}" '
                f'data-ts="{attr(m.ts)}">{self._avatar()}<div class="msg-main">'
                f"{self._head(_clock(m.ts), tags)}{note}{body}{thread}"
                "</div></div>")

    def _avatar(self) -> str:
        return f'<div class="avatar">{html.escape(self.slack.bot_name[:1].upper())}</div>'

    def _head(self, time: str, tags: str) -> str:
        return (f'<div class="msg-head"><b>{html.escape(self.slack.bot_name)}</b>'
                f'<span class="app-tag">APP</span><span class="time">{time}</span>{tags}</div>')

    def _file(self, f: UploadedFile) -> str:
        url = attr(self.file_url(f.id))
        title = html.escape(f.title or f.filename)
        ext = f.filename.rpartition(".")[2].lower()
        comment = (f'<div class="text">{mrkdwn_html(f.initial_comment, self._name)}</div>'
                   if f.initial_comment else "")
        if ext in IMAGES:
            shown = (f'<a href="{url}" target="_blank"><img class="upload" src="{url}" '
                     f'alt="{attr(f.alt_text or f.title or f.filename)}"></a>')
        else:
            shown = (f'<a class="file-card" href="{url}" download="{attr(f.filename)}">📎 '
                     f"{title} <span class=\"size\">{ext.upper() or 'FILE'} · {f.length:,} bytes"
                     "</span></a>")
        return (f'<div class="msg file-msg">{self._avatar()}<div class="msg-main">'
                f'{self._head(_clock(f.ts), "")}{comment}<div class="file-title">{title}</div>'
                f"{shown}</div></div>")

    # -- views -------------------------------------------------------------------------------

    def _home(self) -> str:
        view = self.slack.home(self.user.id)
        if view is None:
            return '<div class="empty">The app has not published a Home for you yet.</div>'
        return (f'<div class="home" data-surface="view" data-view="{attr(view["id"])}">'
                f'{blocks_html(view.get("blocks") or [], self.directory)}</div>')

    def _modal(self) -> dict[str, str] | None:
        view = self.slack.current_modal(self.user.id)
        if view is None:
            return None
        submit = plain(view.get("submit"))
        close = plain(view.get("close")) or "Cancel"
        buttons = f'<button type="button" class="btn" data-close>{html.escape(close)}</button>'
        if submit:
            buttons += (f'<button type="button" class="btn btn-primary" data-submit>'
                        f"{html.escape(submit)}</button>")
        body = blocks_html(view.get("blocks") or [], self.directory)
        markup = (f'<div class="modal" data-surface="view" data-view="{attr(view["id"])}">'
                  f'<div class="modal-head"><span class="modal-title">'
                  f'{plain_html(plain(view.get("title")))}</span>'
                  f'<button type="button" class="x" data-close title="Close">×</button></div>'
                  f'<div class="modal-body">{body}</div><div class="modal-foot">{buttons}</div>'
                  "</div>")
        return {"id": str(view["id"]), "hash": str(view.get("hash", "")), "html": markup}


def _clock(ts: str | None) -> str:
    """A message ts as Slack shows it beside the name: the time it was posted (UTC)."""
    return datetime.fromtimestamp(int(float(ts or 0)), UTC).strftime("%H:%M")


def _note(note: Note) -> str:
    return (f'<div class="msg note"><div class="avatar sys">⚙</div><div class="msg-main">'
            f'<div class="msg-head"><b>devslack</b><span class="time"></span></div>'
            f'<div class="ephemeral">👁 Only visible to you</div>'
            f'<pre class="note-text">{html.escape(note.text)}</pre></div></div>')
