"""`hours=`, `/cluster extend` and `/cluster connect`: parsed, or refused by name."""

import pytest

from bot.domain.commands import ConnectCommand, ExtendCommand, QuoteCommand
from bot.slack.parsing import parse
from tests.slack import refusal


def test_hours_extend_and_connect_parse():
    quote = parse("quote h100x8 nodes=4 hours=36")
    assert isinstance(quote, QuoteCommand) and quote.hours == 36
    assert parse("quote h100x8 nodes=4").hours is None  # type: ignore[union-attr]
    assert parse("extend clu_9xQe1 12") == ExtendCommand("clu_9xQe1", 12)
    assert parse("connect clu_9xQe1") == ConnectCommand("clu_9xQe1")


@pytest.mark.parametrize(("text", "named"), [
    ("quote h100x8 nodes=4 hours=0", "hours=0"),
    ("quote h100x8 nodes=4 hours=abc", "hours=abc"),
    ("quote h100x8 nodes=4 hours=-3", "hours=-3"),
    ("quote h100x8 nodes=4 hours=1.5", "hours=1.5"),
    ("quote h100x8 nodes=4 hours=2 hours=3", "hours=3"),
    ("extend clu_9xQe1 0", "0"),
    ("extend clu_9xQe1 twelve", "twelve"),
    ("extend clu_9xQe1", ""),
    ("extend clu_9xQe1 1 2", "2"),
    ("extend", ""),
    ("connect", ""),
    ("connect clu_9xQe1 now", "now"),
    ("connect ../etc", "../etc"),
])
def test_bad_planning_input_names_the_bad_part(text, named):
    refused = refusal(text)
    assert named in refused.bad_part or named in refused.user_message
