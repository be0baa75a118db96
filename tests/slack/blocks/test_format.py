from datetime import UTC, datetime, timedelta, timezone

import pytest

from bot.domain.models import ShapeSpec
from bot.slack.blocks.format import (
    channel,
    clip,
    duration,
    escape,
    escaped,
    hourly,
    money,
    mrkdwn,
    percent_change,
    shape_label,
    truncate,
    user,
    when,
)


@pytest.mark.parametrize(
    ("cents", "expected"),
    [
        (6253, "$62.53"),
        (150072, "$1,500.72"),
        (3, "$0.03"),
        (0, "$0.00"),
        (100, "$1.00"),
        (-150, "-$1.50"),
        (-3, "-$0.03"),
        (123456789, "$1,234,567.89"),
    ],
)
def test_money(cents, expected):
    assert money(cents) == expected


@pytest.mark.parametrize(("cents", "expected"), [(100.5, "$1.01"), (100.49, "$1.00"),
                                                 (-0.5, "-$0.01")])
def test_money_rounds_stray_fractions_half_up(cents, expected):
    assert money(cents) == expected


def test_hourly():
    assert hourly(6253) == "$62.53/h"


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        (0, "0 s"),
        (45, "45 s"),
        (59.9, "59 s"),
        (60, "1 min"),
        (14 * 60 + 59, "14 min"),
        (3600, "1 h"),
        (2 * 3600 + 10 * 60 + 30, "2 h 10 min"),
        (86400, "1 d"),
        (3 * 86400 + 4 * 3600 + 59 * 60, "3 d 4 h"),
        (-5, "0 s"),
    ],
)
def test_duration(seconds, expected):
    assert duration(seconds) == expected


def test_escape_only_touches_the_three_control_characters():
    assert escape("a & b <!channel> > *bold* `x` ü") == \
        "a &amp; b &lt;!channel&gt; &gt; *bold* `x` ü"


def test_mentions():
    assert user("U123") == "<@U123>"
    assert channel("C123") == "<#C123>"


def test_when_is_a_slack_date_with_utc_fallback():
    dt = datetime(2026, 11, 29, 21, 45, tzinfo=UTC)
    assert when(dt) == ("<!date^1795988700^{date_short_pretty} {time}"
                        "|2026-11-29 21:45 UTC>")
    other = dt.astimezone(timezone(timedelta(hours=2)))
    assert when(other, "{time}") == "<!date^1795988700^{time}|2026-11-29 21:45 UTC>"


def test_when_refuses_naive_datetimes():
    with pytest.raises(ValueError):
        when(datetime(2026, 11, 29, 21, 45))


def test_shape_label():
    shape = ShapeSpec(accelerator="h100-sxm-80gb", gpus_per_node=8, nodes=4)
    assert shape_label(shape, "NVIDIA H100 80GB SXM") == "4 × 8 NVIDIA H100 80GB SXM"
    assert shape_label(shape, " ") == "4 × 8 h100-sxm-80gb"


def test_truncate():
    assert truncate("short", 10) == "short"
    cut = truncate("x" * 300, 75)
    assert len(cut) == 75 and cut.endswith("…")


def test_escaped_truncates_before_escaping_and_flattens_newlines():
    out = escaped("<" * 300, 80)
    assert out.endswith("…") and out.count("&lt;") == 79
    assert escaped("a\nb\t c") == "a b c"
    assert escaped(None) == ""


def test_clip_never_splits_an_entity_or_a_token():
    text = "a" * 95 + "&amp;" + "b" * 50
    out = clip(text, 100)
    assert len(out) <= 100 and "&am…" not in out and out.endswith("…")
    token = "x" * 90 + "<!date^1795988700^{time}|2026-11-29 21:45 UTC> tail"
    out = clip(token, 100)
    assert "<!date" not in out and len(out) <= 100


def test_clip_closes_an_open_code_block():
    out = clip("```" + "y" * 200 + "```", 50)
    assert len(out) <= 50 and out.count("```") == 2


def test_mrkdwn_keeps_our_tokens_and_escapes_the_rest():
    dt = datetime(2026, 11, 29, 21, 45, tzinfo=UTC)
    text = f"{user('U1')} in {channel('C2')} at {when(dt)}: <!channel> <!here> a&b <http://x|y>"
    out = mrkdwn(text)
    assert out.startswith(f"<@U1> in <#C2> at {when(dt)}: ")
    assert "&lt;!channel&gt; &lt;!here&gt; a&amp;b &lt;http://x|y&gt;" in out


def test_percent_change():
    assert percent_change(6000, 6253) == "+4.2%"
    assert percent_change(6253, 6000) == "-4.0%"
    assert percent_change(0, 100) == ""
