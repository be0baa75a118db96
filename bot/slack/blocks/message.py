"""`Message` (what every builder returns) and the few block constructors the builders share.

The constructors clip every text to Slack's limit, so a builder can pass user input through and
never produce a payload Slack rejects. `compose` gives each block an id derived from the content:
an edited message gets new block ids (Slack asks for that), an identical re-render keeps them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
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
from bot.slack.blocks.render import render

# What a builder gets from `from bot.slack.blocks.message import *` (the Slack limits stay here).
__all__ = ["Message", "actions", "button", "compose", "confirm", "context", "divider", "header",
           "md", "plain", "section"]

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
    """A rendered message: the fallback `text` (notifications, screen readers) and its blocks,
    with the blocks as Slack receives them (`rendered`), serialised once (`compose`)."""

    text: str
    blocks: Sequence[Block]
    rendered: Sequence[Mapping[str, Any]] = ()

    def __post_init__(self) -> None:
        if not self.text.strip():
            raise ValueError("a message needs a fallback text")
        if len(self.blocks) > MAX_BLOCKS:
            raise ValueError(f"a message holds at most {MAX_BLOCKS} blocks")
        object.__setattr__(self, "text", clip(self.text, TEXT_MAX))
        object.__setattr__(self, "blocks", tuple(self.blocks))
        if len(self.rendered) != len(self.blocks):
            object.__setattr__(self, "rendered", tuple(render(b) for b in self.blocks))
        else:
            object.__setattr__(self, "rendered", tuple(self.rendered))

    def as_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for chat.postMessage / chat.update / respond / postEphemeral."""
        return {"text": self.text, "blocks": [dict(block) for block in self.rendered]}

    def pairs(self) -> list[tuple[Block, Mapping[str, Any]]]:
        """Each block with its rendering: to compose a bigger message without serialising
        these blocks again."""
        return list(zip(self.blocks, self.rendered, strict=True))


def compose(text: str, blocks: Iterable[Block | tuple[Block, Mapping[str, Any]]], *,
            key: str) -> Message:
    """Build a `Message`, giving every block without one a content-derived `block_id`.

    Serialising here also runs slack_sdk's validators, so a bad block fails in the builder
    (and its tests), not at Slack. Each block is serialised once, here (a block given with its
    rendering, as `Message.pairs` gives them, is not serialised again): it is most of the CPU
    a message costs (~4 ms for a page of `/cluster list` when it was done twice over).
    """
    pairs = [item if isinstance(item, tuple) else (item, render(item)) for item in blocks]
    rendered = [dict(d) for _, d in pairs]
    payload = json.dumps([text, rendered], sort_keys=True)
    digest = hashlib.sha256(payload.encode()).hexdigest()[:10]
    for index, ((block, _), d) in enumerate(zip(pairs, rendered, strict=True)):
        if block.block_id is None:
            block.block_id = d["block_id"] = f"{key}.{index}.{digest}"
    return Message(text=text, blocks=[b for b, _ in pairs], rendered=rendered)


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
