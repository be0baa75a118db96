"""Helpers shared by the Slack tests."""

from __future__ import annotations

import pytest

from bot.domain.errors import InvalidCommand
from bot.slack.parsing import parse


def refusal(text: str, says: str = "", bad_part: str | None = None) -> InvalidCommand:
    """What `/cluster <text>` is refused with (the test fails if it parses); its message says
    `says`, and it names `bad_part` when one is given."""
    with pytest.raises(InvalidCommand) as caught:
        parse(text)
    assert says in caught.value.user_message
    if bad_part is not None:
        assert caught.value.bad_part == bad_part
    return caught.value
