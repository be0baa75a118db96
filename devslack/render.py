"""Block Kit as plain text, for a terminal: headers, sections, fields, context, dividers,
inputs, and every button as `[3] Approve` (the number comes from the caller).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from devslack.blockkit import elements_of, initial_value, options_of, plain

# block, element → the label to print for an interactive element, e.g. "[3] Approve"
Labeller = Callable[[dict[str, Any], dict[str, Any]], str]
Names = Callable[[str], str]

_LINK = re.compile(r"<([^<>|]+)(?:\|([^<>]*))?>")
INDENT = "  "


def mrkdwn(text: str, names: Names) -> str:
    """Slack's `<…>` markup made readable: mentions, channels, dates, links, escapes."""

    def one(match: re.Match[str]) -> str:
        target, label = match.group(1), match.group(2)
        if target.startswith("@"):
            return "@" + (label or names(target[1:]))
        if target.startswith("#"):
            return "#" + (label or names(target[1:]))
        if target.startswith("!date^"):
            return label or target
        if target.startswith("!subteam^"):
            return "@" + (label or target.split("^", 1)[1])
        if target.startswith("!"):
            return "@" + target[1:]
        return f"{label} ({target})" if label else target

    readable = _LINK.sub(one, text)
    return readable.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def text_of(node: object, names: Names) -> str:
    """A text object (plain_text or mrkdwn) as readable text."""
    return mrkdwn(plain(node), names)


def blocks_to_lines(
    blocks: Sequence[dict[str, Any]], *, label: Labeller, names: Names
) -> list[str]:
    """Every block as indented lines of text, buttons labelled by `label`."""
    lines: list[str] = []
    for block in blocks:
        lines.extend(INDENT + line for line in _block(block, label, names))
    return lines


def _block(block: dict[str, Any], label: Labeller, names: Names) -> list[str]:
    kind = block.get("type")
    if kind == "header":
        return [f"== {text_of(block.get('text'), names)} =="]
    if kind == "divider":
        return ["-" * 40]
    if kind == "section":
        lines = text_of(block.get("text"), names).splitlines() if block.get("text") else []
        lines.extend(f"{INDENT}{text_of(f, names)}" for f in block.get("fields") or [])
        lines.extend(label(block, e) for e in elements_of(block))
        return lines or [""]
    if kind == "context":
        parts = [
            text_of(e, names) if e.get("type") != "image" else f"[image: {e.get('alt_text', '')}]"
            for e in block.get("elements") or []
            if isinstance(e, dict)
        ]
        return ["· " + " | ".join(parts)]
    if kind in ("actions", "context_actions"):
        return ["  ".join(label(block, e) for e in elements_of(block))]
    if kind == "input":
        element = block.get("element") or {}
        optional = " (optional)" if block.get("optional") else ""
        shown = display_value(element, initial_value(element))
        return [f"{text_of(block.get('label'), names)}{optional}: {shown}"]
    if kind == "image":
        return [f"[image: {block.get('alt_text', '')}]"]
    if kind == "markdown":
        return str(block.get("text", "")).splitlines()
    if kind == "rich_text":
        return ["".join(_rich(block))]
    return [f"[{kind} block]"]


def element_label(element: dict[str, Any], names: Names) -> str:
    """A non-button element in one line, e.g. `<static_select: Pick a size>`."""
    placeholder = text_of(element.get("placeholder"), names)
    return f"<{element.get('type')}{': ' + placeholder if placeholder else ''}>"


def display_value(element: dict[str, Any], value: Any) -> str:
    """What an input shows for `value`: option labels for selects, the text otherwise."""
    if value in (None, "", []):
        return "(empty)"
    options = {o.get("value"): plain(o.get("text")) for o in options_of(element)}
    if isinstance(value, list):
        return ", ".join(options.get(v, str(v)) for v in value)
    return options.get(value, str(value))


def _rich(node: object) -> list[str]:
    if isinstance(node, dict):
        if node.get("type") in ("text", "link"):
            return [str(node.get("text") or node.get("url") or "")]
        if node.get("type") == "user":
            return ["@" + str(node.get("user_id"))]
        return [piece for child in node.get("elements") or [] for piece in _rich(child)]
    return []
