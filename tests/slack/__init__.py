"""Helpers shared by the Slack tests."""

from __future__ import annotations

import pytest

from bot.domain.errors import InvalidCommand
from bot.slack.parsing import parse


def refusal(text: str) -> InvalidCommand:
    """What `/cluster <text>` is refused with (the test fails if it parses)."""
    with pytest.raises(InvalidCommand) as caught:
        parse(text)
    return caught.value
