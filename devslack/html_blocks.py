"""Block Kit as HTML, for the browser workspace: every block and element the way Slack draws it,
close enough to judge a message by — headers, sections with fields and accessories, context,
dividers, images, actions; buttons with their styles and confirm dialogs; inputs with labels,
hints, placeholders and initial values; checkboxes, radio buttons, selects, pickers.

Interactive elements carry `data-block` / `data-action` (and `data-kind`): the page's script
(static/workspace.js) turns a click, a pick or a form into the payload Slack would send. An
element of an input block is `data-input` (read when the form is submitted); any other is
`data-live` (it acts at once, as in Slack). A confirm object travels as `data-confirm` JSON,
its text already HTML.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from devslack.blockkit import TEXT_INPUTS, initial_value, options_of, plain
from devslack.html_text import mrkdwn_html, plain_html

FileUrl = Callable[[str], str | None]  # an uploaded file's id → where the page can load it


@dataclass(frozen=True)
class Directory:
    """What rendering needs to know of the workspace: names, and who and what can be picked."""

    names: Callable[[str], str]
    people: Sequence[tuple[str, str]] = ()  # (user id, label)
    channels: Sequence[tuple[str, str]] = ()  # (channel id, label)
    file_url: FileUrl = field(default=lambda _id: None)


def attr(value: object) -> str:
    return html.escape(str(value), quote=True)


def text_html(node: object, directory: Directory) -> str:
    """A text object (plain_text or mrkdwn) or a bare string, as HTML."""
    if isinstance(node, dict):
        text = str(node.get("text", ""))
        if node.get("type") == "mrkdwn":
            return mrkdwn_html(text, directory.names)
        return plain_html(text, with_emoji=node.get("emoji", True) is not False)
    return plain_html("" if node is None else str(node))


def blocks_html(blocks: Sequence[dict[str, Any]], directory: Directory) -> str:
    return "".join(_block(block, directory) for block in blocks if isinstance(block, dict))


def _block(block: dict[str, Any], d: Directory) -> str:
    kind = str(block.get("type"))
    bid = attr(block.get("block_id", ""))
    if kind == "header":
        return f'<div class="block header">{text_html(block.get("text"), d)}</div>'
    if kind == "divider":
        return '<hr class="block divider">'
    if kind == "section":
        return _section(block, d)
    if kind == "context":
        parts = "".join(_context_part(e, d) for e in block.get("elements") or []
                        if isinstance(e, dict))
        return f'<div class="block context" data-block-id="{bid}">{parts}</div>'
    if kind in ("actions", "context_actions"):
        elements = "".join(element_html(block, e, d) for e in block.get("elements") or []
                           if isinstance(e, dict))
        return f'<div class="block actions" data-block-id="{bid}">{elements}</div>'
    if kind == "input":
        return _input(block, d)
    if kind == "image":
        return _image_block(block, d)
    if kind == "markdown":
        text = mrkdwn_html(str(block.get("text", "")), d.names)
        return f'<div class="block markdown">{text}</div>'
    if kind == "rich_text":
        return f'<div class="block rich">{_rich(block, d)}</div>'
    return f'<div class="block unknown">[{attr(kind)} block]</div>'


def _section(block: dict[str, Any], d: Directory) -> str:
    body = ""
    if block.get("text"):
        body += f'<div class="text">{text_html(block.get("text"), d)}</div>'
    fields = block.get("fields") or []
    if fields:
        body += '<div class="fields">' + "".join(
            f'<div class="field">{text_html(f, d)}</div>' for f in fields) + "</div>"
    accessory = block.get("accessory")
    side = ""
    if isinstance(accessory, dict):
        if accessory.get("type") == "image":
            side = _img(accessory, d, css="thumb")
        else:
            side = element_html(block, accessory, d)
        side = f'<div class="accessory">{side}</div>'
    bid = attr(block.get("block_id", ""))
    return (f'<div class="block section" data-block-id="{bid}"><div class="body">{body}</div>'
            f"{side}</div>")


def _context_part(element: dict[str, Any], d: Directory) -> str:
    if element.get("type") == "image":
        return _img(element, d, css="tiny")
    return f"<span>{text_html(element, d)}</span>"


def _image_block(block: dict[str, Any], d: Directory) -> str:
    title = block.get("title")
    head = f'<div class="title">{text_html(title, d)}</div>' if title else ""
    return f'<figure class="block image">{head}{_img(block, d, css="full")}</figure>'


def _img(node: dict[str, Any], d: Directory, *, css: str) -> str:
    source = node.get("image_url")
    slack_file = node.get("slack_file")
    if not source and isinstance(slack_file, dict):
        source = slack_file.get("url") or d.file_url(str(slack_file.get("id", "")))
    alt = attr(node.get("alt_text", ""))
    return f'<img class="{css}" src="{attr(source or "")}" alt="{alt}" title="{alt}">'


def _input(block: dict[str, Any], d: Directory) -> str:
    element = block.get("element") if isinstance(block.get("element"), dict) else {}
    optional = ' <span class="optional">(optional)</span>' if block.get("optional") else ""
    label = f'<label class="label">{text_html(block.get("label"), d)}{optional}</label>'
    hint = block.get("hint")
    hint_html = f'<div class="hint">{text_html(hint, d)}</div>' if hint else ""
    bid = attr(block.get("block_id", ""))
    return (f'<div class="block input" data-block-id="{bid}">{label}'
            f'{element_html(block, element or {}, d)}{hint_html}'
            f'<div class="error" hidden></div></div>')


# -- elements ---------------------------------------------------------------------------------


def element_html(block: dict[str, Any], element: dict[str, Any], d: Directory) -> str:
    """One element, wired for the page's script."""
    kind = str(element.get("type"))
    mode = "data-input" if block.get("type") == "input" else "data-live"
    if block.get("type") == "input" and block.get("dispatch_action"):
        mode = "data-input data-dispatch"
    wiring = (f'data-block="{attr(block.get("block_id", ""))}" '
              f'data-action="{attr(element.get("action_id", ""))}" data-kind="{attr(kind)}" '
              f"{mode}{_confirm(element, d)}")
    if kind == "button":
        return _button(element, wiring, d)
    if kind in ("static_select", "external_select", "overflow", "multi_static_select",
                "multi_external_select"):
        return _select(element, wiring, d, options_of(element))
    if kind in ("users_select", "multi_users_select"):
        return _select(element, wiring, d, _choices(d.people))
    if kind in ("conversations_select", "channels_select", "multi_conversations_select",
                "multi_channels_select"):
        return _select(element, wiring, d, _choices(d.channels))
    if kind in ("checkboxes", "radio_buttons"):
        return _choice_list(element, wiring, d)
    if kind in TEXT_INPUTS:
        return _text_input(element, wiring, d)
    if kind in ("datepicker", "timepicker", "datetimepicker"):
        return _picker(element, wiring)
    if kind == "image":
        return _img(element, d, css="thumb")
    return f'<span class="unknown">[{attr(kind)}]</span>'


def _confirm(element: dict[str, Any], d: Directory) -> str:
    confirm = element.get("confirm")
    if not isinstance(confirm, dict):
        return ""
    dialog = {
        "title": plain(confirm.get("title")) or "Are you sure?",
        "text": text_html(confirm.get("text"), d),
        "confirm": plain(confirm.get("confirm")) or "Yes",
        "deny": plain(confirm.get("deny")) or "Cancel",
        "style": confirm.get("style") or "",
    }
    return f' data-confirm="{attr(json.dumps(dialog))}"'


def _button(element: dict[str, Any], wiring: str, d: Directory) -> str:
    style = element.get("style")
    css = "btn" + (f" btn-{attr(style)}" if style in ("primary", "danger") else "")
    extra = f' data-value="{attr(element["value"])}"' if element.get("value") is not None else ""
    if element.get("url"):
        extra += f' data-url="{attr(element["url"])}"'
    label = text_html(element.get("text"), d)
    return f'<button type="button" class="{css}" {wiring}{extra}>{label}</button>'


def _choices(pairs: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    return [{"value": value, "text": {"type": "plain_text", "text": label}}
            for value, label in pairs]


def _select(element: dict[str, Any], wiring: str, d: Directory,
            options: list[dict[str, Any]]) -> str:
    kind = str(element.get("type"))
    multi = kind.startswith("multi_")
    chosen = initial_value(element)
    picked = set(chosen) if isinstance(chosen, list) else {chosen}
    if kind == "overflow":
        head = '<option value="" selected disabled>⋯</option>'
    else:
        placeholder = plain(element.get("placeholder")) or "Select an item"
        none = "" if picked - {None} else " selected"
        head = "" if multi else f'<option value=""{none}>{attr(placeholder)}</option>'
    body = "".join(
        f'<option value="{attr(o.get("value", ""))}"'
        f'{" selected" if o.get("value") in picked else ""}>{attr(plain(o.get("text")))}</option>'
        for o in options)
    css = "overflow" if kind == "overflow" else "select"
    return f'<select class="{css}" {wiring}{" multiple" if multi else ""}>{head}{body}</select>'


def _choice_list(element: dict[str, Any], wiring: str, d: Directory) -> str:
    kind = "checkbox" if element.get("type") == "checkboxes" else "radio"
    chosen = initial_value(element)
    picked = set(chosen) if isinstance(chosen, list) else {chosen}
    group = attr(f'{element.get("action_id", "")}-{id(element)}')
    items = []
    for option in options_of(element):
        value = option.get("value")
        checked = " checked" if value in picked else ""
        description = option.get("description")
        note = f'<div class="desc">{text_html(description, d)}</div>' if description else ""
        items.append(f'<label class="choice"><input type="{kind}" name="{group}" '
                     f'value="{attr(value)}"{checked}><span>{text_html(option.get("text"), d)}'
                     f"{note}</span></label>")
    return f'<div class="choices" {wiring}>{"".join(items)}</div>'


def _text_input(element: dict[str, Any], wiring: str, d: Directory) -> str:
    kind = element.get("type")
    value = element.get("initial_value")
    placeholder = attr(plain(element.get("placeholder")))
    limits = "".join(f' {name}="{attr(element[key])}"' for key, name in (
        ("min_length", "minlength"), ("max_length", "maxlength"), ("min_value", "min"),
        ("max_value", "max")) if element.get(key) is not None)
    if kind == "plain_text_input" and element.get("multiline"):
        return (f'<textarea class="text-input" rows="3" placeholder="{placeholder}"{limits} '
                f'{wiring}>{html.escape(str(value or ""))}</textarea>')
    html_type = {"number_input": "number", "email_text_input": "email",
                 "url_text_input": "url"}.get(str(kind), "text")
    if kind == "number_input":
        limits += ' step="any"' if element.get("is_decimal_allowed") else ' step="1"'
    shown = f' value="{attr(value)}"' if value is not None else ""
    return (f'<input class="text-input" type="{html_type}" placeholder="{placeholder}"'
            f"{shown}{limits} {wiring}>")


def _picker(element: dict[str, Any], wiring: str) -> str:
    kind = element.get("type")
    if kind == "datepicker":
        html_type, value = "date", element.get("initial_date")
    elif kind == "timepicker":
        html_type, value = "time", element.get("initial_time")
    else:
        html_type, value = "datetime-local", None
        stamp = element.get("initial_date_time")
        if isinstance(stamp, int | float):
            value = datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%dT%H:%M")
    shown = f' value="{attr(value)}"' if value else ""
    return f'<input class="text-input" type="{html_type}"{shown} {wiring}>'


def _rich(node: object, d: Directory) -> str:
    """rich_text, simply: its text with bold, italics, code and links."""
    if not isinstance(node, dict):
        return ""
    kind = node.get("type")
    if kind == "text":
        text = plain_html(str(node.get("text", "")))
        style = node.get("style") or {}
        for key, tag in (("bold", "b"), ("italic", "i"), ("strike", "s"), ("code", "code")):
            if style.get(key):
                text = f"<{tag}>{text}</{tag}>"
        return text
    if kind == "link":
        url = str(node.get("url", ""))
        safe = url if url.startswith(("http://", "https://", "mailto:")) else "#"
        return (f'<a href="{attr(safe)}" target="_blank" rel="noopener noreferrer">'
                f'{plain_html(str(node.get("text") or url))}</a>')
    if kind == "user":
        return f'<span class="mention">@{html.escape(d.names(str(node.get("user_id"))))}</span>'
    if kind == "channel":
        return f'<span class="mention">#{html.escape(d.names(str(node.get("channel_id"))))}</span>'
    if kind == "emoji":
        return plain_html(f':{node.get("name", "")}:')
    inner = "".join(_rich(child, d) for child in node.get("elements") or [])
    if kind == "rich_text_preformatted":
        return f"<pre>{inner}</pre>"
    if kind == "rich_text_quote":
        return f'<span class="quote">{inner}</span>'
    if kind == "rich_text_list":
        return "<ul>" + "".join(f"<li>{_rich(c, d)}</li>" for c in node.get("elements") or []) \
            + "</ul>"
    return inner
