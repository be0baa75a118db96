"""`Message` (what every builder returns) and the few block constructors the builders share.

The constructors clip every text to Slack's limit, so a builder can pass user input through and
never produce a payload Slack rejects. `compose` gives each block an id derived from the content:
an edited message gets new block ids (Slack asks for that), an identical re-render keeps them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    ButtonElement,
    ConfirmObject,
    ContextBlock,
    DividerBlock,
    HeaderBlock,
    MarkdownTextObject,
    PlainTextObject,
    SectionBlock,
)

from bot.slack.blocks.format import clip, truncate

MAX_BLOCKS = 50
TEXT_MAX = 3000  # the fallback `text` we send, and a section's text
FIELD_MAX = 2000
FIELDS_MAX = 10
HEADER_MAX = 150
BUTTON_MAX = 75
CONTEXT_ELEMENTS_MAX = 10
CONFIRM_TITLE_MAX = 100
CONFIRM_TEXT_MAX = 300
CONFIRM_BUTTON_MAX = 30


@dataclass(frozen=True)
class Message:
    """A rendered message: the fallback `text` (notifications, screen readers) and its blocks."""

    text: str
    blocks: Sequence[Block]

    def __post_init__(self) -> None:
        if not self.text.strip():
            raise ValueError("a message needs a fallback text")
        if len(self.blocks) > MAX_BLOCKS:
            raise ValueError(f"a message holds at most {MAX_BLOCKS} blocks")
        object.__setattr__(self, "text", clip(self.text, TEXT_MAX))
        object.__setattr__(self, "blocks", tuple(self.blocks))

    def as_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for chat.postMessage / chat.update / respond / postEphemeral."""
        return {"text": self.text, "blocks": [block.to_dict() for block in self.blocks]}


def compose(text: str, blocks: Iterable[Block], *, key: str) -> Message:
    """Build a `Message`, giving every block without one a content-derived `block_id`.

    Serialising here also runs slack_sdk's validators, so a bad block fails in the builder
    (and its tests), not at Slack.
    """
    blocks = list(blocks)
    payload = json.dumps([text, [block.to_dict() for block in blocks]], sort_keys=True)
    digest = hashlib.sha256(payload.encode()).hexdigest()[:10]
    for index, block in enumerate(blocks):
        if block.block_id is None:
            block.block_id = f"{key}.{index}.{digest}"
    return Message(text=text, blocks=blocks)


def md(text: str) -> MarkdownTextObject:
    # verbatim: Slack must not auto-link names or image refs, nor parse bare "@channel".
    return MarkdownTextObject(text=clip(text, TEXT_MAX), verbatim=True)


def plain(text: str, limit: int = TEXT_MAX) -> PlainTextObject:
    return PlainTextObject(text=truncate(text, limit), emoji=True)


def header(text: str) -> HeaderBlock:
    return HeaderBlock(text=plain(text, HEADER_MAX))


def section(
    text: str | None = None,
    *,
    fields: Sequence[str] = (),
    accessory: ButtonElement | None = None,
) -> SectionBlock:
    return SectionBlock(
        text=md(text) if text else None,
        fields=[
            MarkdownTextObject(text=clip(field, FIELD_MAX), verbatim=True)
            for field in fields[:FIELDS_MAX]
        ]
        or None,
        accessory=accessory,
    )


def context(*texts: str) -> ContextBlock:
    return ContextBlock(elements=[md(text) for text in texts[:CONTEXT_ELEMENTS_MAX] if text])


def divider() -> DividerBlock:
    return DividerBlock()


def confirm(title: str, text: str, *, ok: str, deny: str = "Cancel",
            danger: bool = False) -> ConfirmObject:
    """A confirmation dialog; plain text on purpose, so no mention in it can ping anyone."""
    return ConfirmObject(
        title=plain(title, CONFIRM_TITLE_MAX),
        text=plain(text, CONFIRM_TEXT_MAX),
        confirm=plain(ok, CONFIRM_BUTTON_MAX),
        deny=plain(deny, CONFIRM_BUTTON_MAX),
        style="danger" if danger else None,
    )


def button(
    text: str,
    *,
    action_id: str,
    value: str,
    style: str | None = None,
    confirm: ConfirmObject | None = None,
) -> ButtonElement:
    return ButtonElement(
        text=plain(text, BUTTON_MAX),
        action_id=action_id,
        value=value,
        style=style,
        confirm=confirm,
    )


def actions(*buttons: ButtonElement) -> ActionsBlock:
    return ActionsBlock(elements=list(buttons))
