import pytest
from slack_sdk.models.blocks import Block

from bot.slack.blocks.message import (
    Message,
    actions,
    button,
    compose,
    confirm,
    context,
    divider,
    header,
    section,
)
from tests.slack.blocks import HOSTILE, check_blocks


def test_as_kwargs_is_text_plus_block_dicts():
    msg = compose("hello", [section("*hi*"), divider()], key="t")
    kwargs = msg.as_kwargs()
    assert kwargs["text"] == "hello"
    assert [b["type"] for b in kwargs["blocks"]] == ["section", "divider"]
    assert kwargs["blocks"][0]["text"] == {"type": "mrkdwn", "text": "*hi*", "verbatim": True}


def test_block_ids_follow_the_content():
    first = compose("a", [section("one"), section("two")], key="k")
    same = compose("a", [section("one"), section("two")], key="k")
    edited = compose("a", [section("one"), section("three")], key="k")
    ids = [b.block_id for b in first.blocks]
    assert ids == [b.block_id for b in same.blocks]
    assert len(set(ids)) == 2 and all(str(i).startswith("k.") for i in ids)
    assert set(ids).isdisjoint(b.block_id for b in edited.blocks)


def test_an_explicit_block_id_is_kept():
    block = section("x")
    block.block_id = "mine"
    assert compose("a", [block], key="k").blocks[0].block_id == "mine"


def test_message_invariants():
    with pytest.raises(ValueError):
        Message(text=" ", blocks=[])
    with pytest.raises(ValueError):
        Message(text="x", blocks=[divider() for _ in range(51)])
    long = Message(text="y" * 5000, blocks=[])
    assert len(long.text) <= 3000 and long.text.endswith("…")
    assert isinstance(long.blocks, tuple)


def test_constructors_clip_to_slack_limits():
    ok = confirm(HOSTILE * 5, HOSTILE * 5, ok=HOSTILE, deny=HOSTILE)
    blocks: list[Block] = [
        header(HOSTILE * 5),
        section(HOSTILE * 50, fields=[HOSTILE * 20] * 12),
        context(*([HOSTILE * 20] * 12)),
        actions(button(HOSTILE, action_id="a", value="v", style="danger", confirm=ok)),
    ]
    msg = compose("x", blocks, key="limits")
    dicts = check_blocks(list(msg.blocks), max_blocks=50)
    assert len(dicts[1]["fields"]) == 10
    assert len(dicts[2]["elements"]) == 10
