"""Text helpers every builder shares: money, durations, mentions, dates, escaping, clipping.

Slack's mrkdwn gives `&`, `<` and `>` a meaning (`<!channel>` pings everyone), so every string a
person or the provider typed goes through `escape` before it reaches a mrkdwn text. Lengths are
clipped here, never rejected: a 255-character cluster name must not stop a notification.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import UTC, datetime
from decimal import ROUND_HALF_UP, Decimal

from bot.domain.models import ShapeSpec

# What a builder gets from `from bot.slack.blocks.format import *`: every builder uses most of it,
# so the list is said here once rather than in each builder's imports.
__all__ = ["ERROR_MAX", "ID_MAX", "IMAGE_MAX", "NAME_MAX", "channel", "clip", "code", "duration",
           "escape", "escaped", "fit_lines", "hourly", "money", "mrkdwn", "payload_len",
           "percent_change", "shape_label", "truncate", "user", "when"]

ELLIPSIS = "…"

# Longest raw user/provider strings we echo; short enough that a card with every field at its
# maximum stays far below Slack's ~13k-character message budget.
NAME_MAX = 80
IMAGE_MAX = 200
ERROR_MAX = 500
ID_MAX = 64

# Mention and date tokens the bot itself writes (`user()`, `channel()`, `when()`); `mrkdwn()`
# keeps these and escapes every other `<…>` (`<!channel>`, `<!here>`, links, user groups).
_SAFE_TOKEN = re.compile(
    r"<(?:@[UW][A-Z0-9]+(?:\|[^<>|]*)?"
    r"|#C[A-Z0-9]+(?:\|[^<>|]*)?"
    r"|!date\^\d+\^[^<>|]*(?:\^[^<>|]*)?\|[^<>|]*)>"
)


def money(cents: int) -> str:
    """`6253` → `"$62.53"`, `150072` → `"$1,500.72"`, `-150` → `"-$1.50"`."""
    if not isinstance(cents, int):
        # Money is integer cents; a stray fraction is rounded half-up, never truncated.
        cents = int(Decimal(str(cents)).quantize(Decimal(1), rounding=ROUND_HALF_UP))
    sign = "-" if cents < 0 else ""
    dollars, rest = divmod(abs(cents), 100)
    return f"{sign}${dollars:,}.{rest:02d}"


def hourly(cents: int) -> str:
    """`6253` → `"$62.53/h"`."""
    return f"{money(cents)}/h"


def duration(seconds: float) -> str:
    """A short human duration, rounded down: `"45 s"`, `"12 min"`, `"2 h 10 min"`, `"3 d 4 h"`."""
    total = max(0, int(seconds))
    if total < 60:
        return f"{total} s"
    minutes = total // 60
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


def escape(text: str) -> str:
    """Slack mrkdwn escaping: `&`, `<` and `>` only (the rest is shown as typed)."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def truncate(text: str, limit: int) -> str:
    """Raw text cut to `limit` characters with an ellipsis (for plain_text and user input)."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 1)].rstrip() + ELLIPSIS


def escaped(text: str | None, limit: int = NAME_MAX) -> str:
    """User/provider input for mrkdwn: one line, truncated, then escaped (never half an entity)."""
    return escape(truncate(" ".join((text or "").split()), limit))


def mrkdwn(text: str) -> str:
    """Escape bot-composed text that may carry user input, keeping our own mentions and dates.

    `<@U…>`, `<#C…>` and `<!date^…>` survive; `<!channel>`, `<!here>`, links and stray `&<>`
    are escaped. For notes and notices whose author cannot escape every part.
    """
    out: list[str] = []
    last = 0
    for match in _SAFE_TOKEN.finditer(text):
        out.append(escape(text[last : match.start()]))
        out.append(match.group(0))
        last = match.end()
    out.append(escape(text[last:]))
    return "".join(out)


def clip(text: str, limit: int) -> str:
    """Cut already-formatted mrkdwn to `limit` without splitting an entity, a `<…>` token or
    leaving a code block open."""
    if len(text) <= limit:
        return text
    cut = text[: max(0, limit - 4)]  # room for the ellipsis and a closing ```
    lt = cut.rfind("<")
    if lt > cut.rfind(">"):
        cut = cut[:lt]
    amp = cut.rfind("&")
    if amp > cut.rfind(";"):
        cut = cut[:amp]
    cut = cut.rstrip() + ELLIPSIS
    if cut.count("```") % 2:
        cut += "```"
    return cut


def user(user_id: str) -> str:
    """A user mention: `"<@U123>"`."""
    return f"<@{escape(user_id)}>"


def channel(channel_id: str) -> str:
    """A channel link: `"<#C123>"`."""
    return f"<#{escape(channel_id)}>"


def when(dt: datetime, fmt: str = "{date_short_pretty} {time}") -> str:
    """A date Slack shows in each reader's own time zone, with a UTC fallback."""
    if dt.tzinfo is None:
        raise ValueError("when() needs an aware datetime")
    utc = dt.astimezone(UTC)
    return f"<!date^{int(utc.timestamp())}^{fmt}|{utc:%Y-%m-%d %H:%M} UTC>"


def shape_label(shape: ShapeSpec, accelerator_name: str) -> str:
    """`"4 × 8 NVIDIA H100 80GB SXM"` (nodes × GPUs per node, then the catalog name); raw text."""
    name = truncate(accelerator_name.strip() or shape.accelerator, NAME_MAX)
    return f"{shape.nodes} × {shape.gpus_per_node} {name}"


def percent_change(old_cents: int, new_cents: int) -> str:
    """`"+4.2%"` / `"-10.0%"`; empty when the old price was zero (no meaningful ratio)."""
    if old_cents == 0:
        return ""
    return f"{(new_cents - old_cents) / old_cents * 100:+.1f}%"


def code(text: str) -> str:
    """Inline code for ids and short values; backticks are dropped so the span cannot break."""
    return f"`{text.replace('`', '')}`"


def payload_len(text: str) -> int:
    """Characters `text` takes in the JSON sent to Slack (non-ASCII escaped): the size budget."""
    return len(json.dumps(text)) - 2


def fit_lines(lines: Sequence[str], budget: int, more: str = "…and {n} more") -> list[str]:
    """As many whole lines as fit `budget` payload characters; the rest summarised by `more`."""
    if sum(payload_len(line) + 1 for line in lines) <= budget:
        return list(lines)
    room = budget - payload_len(more.format(n=len(lines))) - 1
    kept: list[str] = []
    for line in lines:
        room -= payload_len(line) + 1
        if room < 0:
            break
        kept.append(line)
    kept.append(more.format(n=len(lines) - len(kept)))
    return kept
