"""Block Kit validation, the ids Slack fills in, and the state values Slack sends."""

from __future__ import annotations

from typing import Any

import pytest
from slack_sdk.models.blocks import (
    ActionsBlock,
    ButtonElement,
    ConfirmObject,
    HeaderBlock,
    SectionBlock,
)

from devslack.blockkit import (
    block_problems,
    buttons,
    initial_state,
    state_entry,
    view_problems,
    with_ids,
)


def opt(value: str) -> dict[str, Any]:
    return {"text": {"type": "plain_text", "text": value.title()}, "value": value}


def test_blocks_built_with_slack_sdk_models_pass():
    blocks = [
        HeaderBlock(text="Quote").to_dict(),
        SectionBlock(text="*4 × h100x8*", fields=["a", "b"]).to_dict(),
        ActionsBlock(
            elements=[
                ButtonElement(
                    text="Approve",
                    action_id="approve",
                    value="req-1",
                    style="primary",
                    confirm=ConfirmObject(title="Sure?", text="Spend $1,234"),
                ),
                ButtonElement(text="Reject", action_id="reject", value="req-1", style="danger"),
            ]
        ).to_dict(),
    ]
    assert block_problems(blocks, limit=50) == []


def test_duplicate_action_ids_in_a_block_are_refused():
    button = {"type": "button", "action_id": "same", "text": {"type": "plain_text", "text": "x"}}
    problems = block_problems([{"type": "actions", "elements": [button, button]}], limit=50)
    assert problems == ["blocks[0] (actions): duplicate action_id 'same'"]


def test_a_confirm_dialog_over_the_limits_is_refused():
    confirm = {
        "title": {"type": "plain_text", "text": "t" * 101},
        "text": {"type": "plain_text", "text": "x"},
        "confirm": {"type": "plain_text", "text": "ok"},
        "deny": {"type": "plain_text", "text": "no"},
    }
    button = {
        "type": "button",
        "action_id": "a",
        "text": {"type": "plain_text", "text": "x"},
        "confirm": confirm,
    }
    [problem] = block_problems([{"type": "actions", "elements": [button]}], limit=50)
    assert "100" in problem


def test_view_checks_cover_the_sdk_and_slack_rules():
    home_with_submit = {
        "type": "home",
        "submit": {"type": "plain_text", "text": "Go"},
        "blocks": [{"type": "divider"}],
    }
    assert "home view cannot have submit and close" in view_problems(
        home_with_submit, expected_type="home"
    )
    mrkdwn_title = {
        "type": "modal",
        "title": {"type": "mrkdwn", "text": "T"},
        "blocks": [{"type": "divider"}],
    }
    assert "title must be a plain_text object" in view_problems(mrkdwn_title, expected_type="modal")
    assert view_problems("nope", expected_type="modal") == ["view must be a JSON object"]


def test_a_home_published_again_with_new_ids_is_judged_once_but_judged_whole():
    """An App Home's block ids change with anything on it: the same blocks under new ids of the
    same length are not parsed again, while every rule still holds for each view."""
    from devslack import blockkit

    def home(digest: str, **extra: Any) -> dict[str, Any]:
        section = {"type": "section", "text": {"type": "mrkdwn", "text": "*$62.53/h*"}}
        blocks = [{**section, "block_id": f"home.{i}.{digest}"} for i in range(3)]
        return {"type": "home", "blocks": blocks, **extra}

    assert view_problems(home("0123456789"), expected_type="home") == []
    parsed = blockkit._block_verdict.cache_info().misses, blockkit._view_verdict.cache_info().misses
    assert view_problems(home("abcdefghij"), expected_type="home") == []
    assert (blockkit._block_verdict.cache_info().misses,
            blockkit._view_verdict.cache_info().misses) == parsed  # nothing parsed again
    long_id = home("0123456789")
    long_id["blocks"][1]["block_id"] = "x" * 256
    assert any("block_id" in p and "255" in p
               for p in view_problems(long_id, expected_type="home"))
    twice = home("0123456789")
    twice["blocks"][2]["block_id"] = twice["blocks"][0]["block_id"]
    assert any("duplicate block_id" in p for p in view_problems(twice, expected_type="home"))
    too_many = {"type": "home", "blocks": [{"type": "divider"}] * 101}
    assert any("between 1 and 100 blocks" in p
               for p in view_problems(too_many, expected_type="home"))
    assert "home view cannot have submit and close" in view_problems(
        home("0123456789", close={"type": "plain_text", "text": "x"}), expected_type="home")


def test_with_ids_fills_what_slack_fills_and_keeps_the_rest():
    blocks: list[dict[str, Any]] = [
        {"type": "section", "text": {"type": "mrkdwn", "text": "a"}},
        {
            "type": "actions",
            "block_id": "mine",
            "elements": [{"type": "button", "text": {"type": "plain_text", "text": "b"}}],
        },
    ]
    filled = with_ids(blocks)
    assert filled[0]["block_id"] and filled[1]["block_id"] == "mine"
    assert filled[1]["elements"][0]["action_id"]
    assert with_ids(blocks) == filled  # stable
    assert "block_id" not in blocks[0]  # the input is left alone


def test_buttons_are_found_in_reading_order():
    accessory = {
        "type": "button",
        "action_id": "more",
        "text": {"type": "plain_text", "text": "More"},
    }
    link = {
        "type": "button",
        "action_id": "docs",
        "url": "https://x.io",
        "text": {"type": "plain_text", "text": "Docs"},
    }
    blocks: list[dict[str, Any]] = [
        {
            "type": "section",
            "block_id": "s",
            "text": {"type": "mrkdwn", "text": "x"},
            "accessory": accessory,
        },
        {"type": "actions", "block_id": "a", "elements": [link]},
    ]
    found = buttons(blocks)
    assert [(b.block_id, b.action_id, b.text, b.url) for b in found] == [
        ("s", "more", "More", None),
        ("a", "docs", "Docs", "https://x.io"),
    ]


@pytest.mark.parametrize(
    ("element", "value", "entry"),
    [
        ({"type": "plain_text_input"}, "hi", {"type": "plain_text_input", "value": "hi"}),
        (
            {"type": "number_input", "is_decimal_allowed": False},
            4,
            {"type": "number_input", "value": "4"},
        ),
        (
            {"type": "static_select", "options": [opt("a"), opt("b")]},
            "b",
            {"type": "static_select", "selected_option": opt("b")},
        ),
        (
            {"type": "radio_buttons", "options": [opt("a")]},
            None,
            {"type": "radio_buttons", "selected_option": None},
        ),
        (
            {"type": "checkboxes", "options": [opt("a"), opt("b"), opt("c")]},
            ["a", "c"],
            {"type": "checkboxes", "selected_options": [opt("a"), opt("c")]},
        ),
        ({"type": "users_select"}, "U0BOB", {"type": "users_select", "selected_user": "U0BOB"}),
        (
            {"type": "datepicker"},
            "2026-12-01",
            {"type": "datepicker", "selected_date": "2026-12-01"},
        ),
    ],
)
def test_state_entries_have_slacks_shape(
    element: dict[str, Any], value: Any, entry: dict[str, Any]
):
    assert state_entry({**element, "action_id": "x"}, value) == entry


def test_state_entries_refuse_what_slack_could_not_send():
    with pytest.raises(ValueError, match="'z' is not an option"):
        state_entry({"type": "static_select", "action_id": "x", "options": [opt("a")]}, "z")
    with pytest.raises(ValueError, match="cannot fill"):
        state_entry({"type": "file_input", "action_id": "x"}, "f")


def test_initial_state_reads_initial_values_of_inputs():
    blocks = [
        {
            "type": "input",
            "block_id": "n",
            "label": {"type": "plain_text", "text": "N"},
            "element": {"type": "plain_text_input", "action_id": "v", "initial_value": "Ada"},
        },
        {
            "type": "input",
            "block_id": "c",
            "label": {"type": "plain_text", "text": "C"},
            "element": {
                "type": "checkboxes",
                "action_id": "v",
                "options": [opt("a")],
                "initial_options": [opt("a")],
            },
        },
        {"type": "section", "text": {"type": "mrkdwn", "text": "not an input"}},
    ]
    assert initial_state(blocks) == {
        "n": {"v": {"type": "plain_text_input", "value": "Ada"}},
        "c": {"v": {"type": "checkboxes", "selected_options": [opt("a")]}},
    }
