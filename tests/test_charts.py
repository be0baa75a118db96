"""The charts: real PNGs of the right size with real content, from the domain's own sums.
Their speed is measured in `python -m benchmarks charts`, not asserted here."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import pytest

from benchmarks.charts import draw, month_of
from bot.domain.hours import HourState
from bot.domain.spend import spend_report
from bot.domain.spend_days import daily_cents
from bot.slack import charts
from tests.domain import make_cluster

Image = pytest.importorskip("PIL.Image")


def decoded(png: bytes):
    image = Image.open(io.BytesIO(png))
    image.load()
    return image


def test_spend_chart_of_a_month_of_50_clusters_is_a_real_picture():
    report, now = month_of(50)
    png = draw(report, now)
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    image = decoded(png)
    assert image.size == (1000, 600) and image.format == "PNG"
    colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
    assert len(colours) > 200  # bars in many owner colours, text, antialiasing
    # Neither blank nor one colour: the background is less than 90 % of the picture.
    assert max(count for count, _ in colours) < 0.9 * 1000 * 600
    # Each owner colour in the palette is drawn (the largest owners, then "others").
    rgb = {colour for _, colour in colours}
    for hex_colour in charts._PALETTE[:len(report.by_owner[:charts.OWNERS_SHOWN])]:
        assert tuple(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)) in rgb


def test_days_add_up_to_the_reports_total():
    report, now = month_of(50, seed=11)
    days = daily_cents(report, now=now)
    assert len(days) == 30 and days[0][0].day == 1
    assert sum(cents for _, cents in days) == report.total_cents
    assert all(cents == 0 for day, cents in days if day > now.date())


def test_a_cluster_across_midnight_is_split_by_the_hour_of_each_charge():
    ready = datetime(2026, 11, 3, 22, 30, tzinfo=UTC)
    c = make_cluster(ready_at=ready, accrued_hours=4, accrued_cents=4 * 6253,
                     created_at=ready - timedelta(minutes=5))
    now = datetime(2026, 11, 4, 2, 0, tzinfo=UTC)
    days = dict(daily_cents(spend_report([c], "2026-11", now), now=now))
    assert days[ready.date()] == 2 * 6253  # 22:30, 23:30
    assert days[now.date()] == 2 * 6253  # 00:30, 01:30


def test_hours_chart_marks_each_state():
    at = datetime(2026, 11, 3, tzinfo=UTC)
    hours = ([(at, HourState.BILLED)] * 20 + [(at, HourState.DEGRADED)] * 5
             + [(at, HourState.NOT_BILLED)] * 2 + [(at, HourState.NOT_SERVING)] * 3)
    image = decoded(charts.hours_png(title="clu_1: 28 billed hours", hours=hours))
    assert image.size == (1000, 300)
    rgb = {colour for _, colour in image.convert("RGB").getcolors(maxcolors=1 << 20)}
    for state in HourState:
        hex_colour = charts.HOUR_COLOURS[state]
        assert tuple(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)) in rgb, state


def test_spend_chart_states_the_total_to_the_cent_names_its_axis_and_labels_each_owner():
    """The title said "$1,235" for $1,234.56, the day axis had no title, and a small
    unclaimed volume's bar was invisible beside thousands of dollars."""
    day = datetime(2026, 11, 3, tzinfo=UTC).date()
    fig = charts.spend_figure(month="2026-11", days=[(day, 123_456)],
                              owners=[("alice", 123_400), ("unclaimed", 56)],
                              total_cents=123_456)
    assert fig.get_suptitle() == "AI Reserve spend 2026-11: $1,234.56"
    by_day, by_owner = fig.axes
    assert by_day.get_ylabel() == "charged that day (USD)"
    labels = [t.get_text() for t in by_owner.texts]
    assert labels == ["$0.56", "$1,234.00"]  # drawn bottom-up: the unclaimed one is read
    assert [t.get_text() for t in by_owner.get_yticklabels()] == ["unclaimed", "alice"]


async def test_owners_are_shown_by_their_slack_names_else_their_id():
    from slack_sdk.errors import SlackApiError

    from bot.slack.uploads import display_names

    class Client:
        async def users_info(self, *, user: str):
            if user == "U0GONE":
                raise SlackApiError("user_not_found", {"ok": False, "error": "user_not_found"})
            names = {"U0ALICE": "alice", "U0ALEX": "alice", "U0BOB": ""}
            return {"user": {"real_name": "Bob Baker", "profile": {
                "display_name": names[user], "real_name": "Bob Baker" if user == "U0BOB"
                else "Alice"}}}

    names = await display_names(Client(), ["U0ALICE", "U0BOB", "U0ALEX", "U0GONE"])  # type: ignore[arg-type]
    assert names == {"U0ALICE": "alice", "U0BOB": "Bob Baker", "U0ALEX": "alice (U0ALEX)"}


def test_the_hours_chart_is_titled_with_the_cluster_and_ticks_whole_hours():
    """Issue 27.12: titled with the raw id alone, and half-hour ticks on an axis of hours."""
    from bot.slack.uploads import hours_picture

    at = datetime(2026, 11, 3, tzinfo=UTC)
    c = make_cluster(accrued_hours=3)
    picture = hours_picture(c, [(at, HourState.BILLED)] * 3)
    assert not picture.title.startswith(c.id)
    assert picture.title == f"2 × 8 NVIDIA H100 80GB SXM ({c.id}): 3 billed hours"
    named = hours_picture(c.model_copy(update={"name": "llama-ft"}), [])
    assert named.title.startswith(f"llama-ft ({c.id})")
    fig = charts.hours_figure(title=picture.title, hours=[(at, HourState.BILLED)] * 3)
    ticks = fig.axes[0].get_xticks()
    assert len(ticks) > 1 and all(float(t).is_integer() for t in ticks), ticks


def test_the_same_figures_are_drawn_once_and_send_the_same_picture(monkeypatch):
    """`/cluster spend` asked again with nothing new billed: the PNG kept, not drawn again
    (a tenth of a second of CPU each); any other figure draws anew."""
    drawn: list[str] = []
    show = charts._SpendChart.show

    def counted(self, **kwargs):
        drawn.append(kwargs["month"])
        return show(self, **kwargs)

    monkeypatch.setattr(charts._SpendChart, "show", counted)
    charts.forget_charts()
    report, now = month_of(5)
    days = daily_cents(report, now=now)
    owners = [(owner or "unclaimed", cents) for owner, cents in report.by_owner]

    def png(**changes):
        kwargs = {"month": report.month, "days": list(days), "owners": list(owners),
                  "total_cents": report.total_cents} | changes
        return charts.spend_png(**kwargs)

    first = png()
    assert png() == first and len(drawn) == 1  # new lists of the same figures: kept
    assert png(total_cents=report.total_cents + 1) != first and len(drawn) == 2
    assert png(group="project") != first and len(drawn) == 3
    assert png(days=[*days[:-1], (days[-1][0], days[-1][1] + 10**7)]) != first and len(drawn) == 4
    charts.forget_charts()
    assert png() == first and len(drawn) == 5  # drawn again: the very same picture


def test_a_month_drawn_on_the_kept_figure_is_the_picture_a_figure_of_its_own_draws():
    """Each month is drawn on the figure the last one was drawn on (a third less CPU): nothing
    of the last month may stay on it — no bar, no figure, no owner, no limit of the axes."""
    charts.forget_charts()
    big, now = month_of(50, seed=5)
    charts.spend_png(month=big.month, days=daily_cents(big, now=now), total_cents=12_345,
                     owners=[(f"owner {i}", 10_000 - i) for i in range(14)])  # 10 + others
    kept = charts._kept
    day = datetime(2026, 11, 3, tzinfo=UTC).date()
    # Two owners of one name are two bars (categorical labels once folded them into one).
    small = {"month": "2026-12", "days": [(day, 5_000)], "total_cents": 5_056,
             "owners": [("alice", 5_000), ("alice", 56)]}
    charts.forget_charts()
    png = charts.spend_png(**small)
    assert charts._kept is kept  # drawn on the kept figure, not one of its own
    alone = charts._png(charts.spend_figure(**small))
    assert decoded(png).tobytes() == decoded(alone).tobytes()
    by_day, by_owner = kept.fig.axes
    assert [t.get_text() for t in by_owner.texts] == ["$0.56", "$50.00"]
    assert [t.get_text() for t in by_owner.get_yticklabels()] == ["alice", "alice"]
    assert len(by_day.patches) == 1 and len(by_owner.patches) == 2
