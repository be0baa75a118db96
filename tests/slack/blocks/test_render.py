"""bot/slack/blocks/render.py gives what slack_sdk's to_dict gives, validators included."""

from __future__ import annotations

import pytest
from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.blocks import (
    ActionsBlock,
    ButtonElement,
    CheckboxesElement,
    ConfirmObject,
    InputBlock,
    Option,
    PlainTextObject,
    RichTextBlock,
    RichTextSectionElement,
    SectionBlock,
)
from slack_sdk.models.views import View

from bot.slack.blocks import render as renderer
from bot.slack.blocks.render import render


@pytest.fixture(autouse=True)
def _compare_by_hand(monkeypatch):
    monkeypatch.setattr(renderer, "CROSS_CHECK", False)  # these tests compare themselves


def _button(**changes):
    return ButtonElement(**{"text": "Go", "action_id": "a", "value": "v", **changes})


OBJECTS = [
    SectionBlock(text="*hi*", fields=["a", "b"], accessory=_button(style="danger")),
    SectionBlock(text="no fields", fields=[]),  # an empty list is left out
    ActionsBlock(elements=[_button(), _button(confirm=ConfirmObject(
        title="Sure?", text="Really", confirm="Yes", deny="No", style="danger"))]),
    InputBlock(label="Pick", block_id="b", optional=True, element=CheckboxesElement(
        action_id="c", options=[Option(value="1", text=PlainTextObject(text="One"))])),
    RichTextBlock(elements=[RichTextSectionElement(elements=[])]),  # empty allowed here
    View(type="modal", title="T", submit="Go", blocks=[SectionBlock(text="x")]),
]


@pytest.mark.parametrize("obj", OBJECTS, ids=lambda o: type(o).__name__)
def test_it_renders_what_slack_sdk_renders(obj):
    assert render(obj) == obj.to_dict()
    assert render(obj) == obj.to_dict()  # and again, from the per-class plan


def test_the_validators_still_run():
    too_long = ButtonElement(text="x" * 76, action_id="a", value="v")
    with pytest.raises(SlackObjectFormationError, match="text"):
        too_long.to_dict()
    with pytest.raises(SlackObjectFormationError, match="text"):
        render(ActionsBlock(elements=[too_long]))


def test_the_cross_check_catches_a_difference(monkeypatch):
    monkeypatch.setattr(renderer, "CROSS_CHECK", True)
    block = SectionBlock(text="x")
    monkeypatch.setitem(renderer._plans, SectionBlock, ((), ("type",)))  # a wrong plan
    with pytest.raises(AssertionError, match="SectionBlock"):
        render(block)
