"""Slack's text as HTML, for the browser workspace: mrkdwn (bold, italics, strikethrough, code,
code blocks, quotes, links, user and channel mentions, dates) and emoji shortcodes.

Everything the bot sent is escaped first: markup comes only from what this module adds, so a
cluster named `<script>` shows as text. Slack's own escapes (`&lt;` `&gt;` `&amp;`) are read
back to the characters they stand for before that.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable

Names = Callable[[str], str]  # a user or channel id → its readable name

EMOJI = {
    "alarm_clock": "⏰", "arrow_right": "➡️", "arrows_counterclockwise": "🔄",
    "ballot_box_with_check": "☑️", "bar_chart": "📊", "bell": "🔔", "bulb": "💡",
    "busts_in_silhouette": "👥", "calendar": "📅", "chart_with_upwards_trend": "📈",
    "checkered_flag": "🏁", "clock1": "🕐", "credit_card": "💳", "dollar": "💵",
    "exclamation": "❗", "eyes": "👀", "file_cabinet": "🗄️", "fire": "🔥", "floppy_disk": "💾",
    "gear": "⚙️", "hammer_and_wrench": "🛠️", "heavy_check_mark": "✔️",
    "heavy_multiplication_x": "✖️", "heavy_plus_sign": "➕", "hourglass": "⌛",
    "hourglass_flowing_sand": "⏳", "information_source": "ℹ️", "key": "🔑",
    "large_blue_circle": "🔵", "large_green_circle": "🟢", "large_orange_circle": "🟠",
    "large_purple_circle": "🟣", "large_yellow_circle": "🟡", "leftwards_arrow_with_hook": "↩️",
    "lock": "🔒", "memo": "📝", "money_with_wings": "💸", "moneybag": "💰", "no_entry": "⛔",
    "no_entry_sign": "🚫", "package": "📦", "pause_button": "⏸️", "question": "❓",
    "raising_hand": "🙋", "receipt": "🧾", "red_circle": "🔴", "repeat": "🔁",
    "robot_face": "🤖", "rocket": "🚀", "rotating_light": "🚨", "spiral_calendar_pad": "🗓️",
    "stop_button": "⏹️", "tada": "🎉", "thumbsup": "👍", "+1": "👍", "-1": "👎",
    "warning": "⚠️", "wastebasket": "🗑️", "white_check_mark": "✅", "white_circle": "⚪",
    "wrench": "🔧", "x": "❌", "zap": "⚡", "zzz": "💤",
}

_FENCE = re.compile(r"```\n?(.*?)```", re.S)
_CODE = re.compile(r"`([^`\n]+)`")
_LINK = re.compile(r"<([^<>|\n]+)(?:\|([^<>\n]*))?>")
_EMOJI = re.compile(r":([a-z0-9_+\-]+):")
# *bold*, _italic_, ~strike~: a marker opens after a start, a space or punctuation, and closes
# before an end, a space or punctuation (Slack's rule: `2*3*4` stays as it is).
_EDGE_BEFORE = r"(?:^|(?<=[\s(\[{'\"\x00.,;:!?/-]))"
_EDGE_AFTER = r"(?=$|[\s)\]}'\"\x00.,;:!?/-])"
_STYLES = tuple(
    (re.compile(_EDGE_BEFORE + re.escape(mark) + r"(?=\S)([^\n]*?\S)" + re.escape(mark)
                + _EDGE_AFTER, re.M), tag)
    for mark, tag in (("*", "b"), ("_", "i"), ("~", "s"))
)
_SLOT = re.compile("\x00(\\d+)\x00")


def slack_unescape(text: str) -> str:
    """Slack's three escapes read back (what a person sees)."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def emoji(escaped: str) -> str:
    """`:name:` shortcodes as the emoji (unknown ones stay as typed)."""
    return _EMOJI.sub(lambda m: EMOJI.get(m[1], m[0]), escaped)


def plain_html(text: str, *, with_emoji: bool = True) -> str:
    """A plain_text object's text: escaped, line breaks kept, emoji if asked (Slack's default)."""
    escaped = html.escape(text)
    return (emoji(escaped) if with_emoji else escaped).replace("\n", "<br>")


def mrkdwn_html(text: str, names: Names) -> str:
    """A mrkdwn string as HTML."""
    parts: list[str] = []
    at = 0
    for fence in _FENCE.finditer(text):
        parts.append(_inline(text[at:fence.start()], names))
        parts.append(f"<pre>{html.escape(slack_unescape(fence[1]))}</pre>")
        at = fence.end()
    parts.append(_inline(text[at:], names))
    return "".join(parts)


def _inline(text: str, names: Names) -> str:
    """Text outside code blocks: links and code become slots, the rest is escaped and styled."""
    slots: list[str] = []

    def slot(markup: str) -> str:
        slots.append(markup)
        return f"\x00{len(slots) - 1}\x00"

    text = _CODE.sub(lambda m: slot(f"<code>{html.escape(slack_unescape(m[1]))}</code>"), text)
    text = _LINK.sub(lambda m: slot(_link(m[1], m[2], names)), text)
    escaped = html.escape(slack_unescape(text), quote=False)
    for pattern, tag in _STYLES:
        escaped = pattern.sub(rf"<{tag}>\1</{tag}>", escaped)
    escaped = emoji(escaped)
    lines = escaped.split("\n")
    shown = [f'<span class="quote">{line[5:]}</span>' if line.startswith("&gt; ") else line
             for line in lines]
    joined = "<br>".join(shown)
    return _SLOT.sub(lambda m: slots[int(m[1])], joined)


def _link(target: str, label: str | None, names: Names) -> str:
    """One `<…>`: a mention, a channel, a special mention, a date or a link."""
    shown = html.escape(slack_unescape(label)) if label else None
    if target.startswith("@"):
        return f'<span class="mention">@{shown or html.escape(names(target[1:]))}</span>'
    if target.startswith("#"):
        return f'<span class="mention">#{shown or html.escape(names(target[1:]))}</span>'
    if target.startswith("!date^"):
        return f'<span class="date">{shown or html.escape(target)}</span>'
    if target.startswith("!subteam^"):
        group = html.escape(target.split("^", 1)[1])
        return f'<span class="mention">{shown or "@" + group}</span>'
    if target.startswith("!"):
        return f'<span class="mention">@{html.escape(target[1:])}</span>'
    url = slack_unescape(target)
    safe = url if url.startswith(("http://", "https://", "mailto:")) else "#"
    return (f'<a href="{html.escape(safe)}" target="_blank" rel="noopener noreferrer">'
            f"{shown or html.escape(url)}</a>")
