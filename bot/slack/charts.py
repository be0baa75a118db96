"""Pictures where a picture beats text: PNGs drawn with matplotlib's Agg canvas (no pyplot,
no display), imported only when a chart is drawn so start-up stays fast.

Drawing takes a tenth of a second of CPU or more: callers run it off the event loop
(`asyncio.to_thread`). The input is plain numbers and labels; the sums are the domain's. The
same figures draw the same picture: `/cluster spend` asked again before anything new was billed
sends the PNG drawn last time (the last `CHARTS_KEPT` are kept), and a new month is drawn on
the figure the last one was drawn on (`_SpendChart`: a third less CPU than a figure of its own,
the same pixels)."""

from __future__ import annotations

import io
import threading
from collections.abc import Sequence
from datetime import date, datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from bot.domain.hours import HourState

if TYPE_CHECKING:
    from matplotlib.figure import Figure

WIDTH, HEIGHT, DPI = 10.0, 6.0, 100  # 1000 × 600 px
OWNERS_SHOWN = 10
CHARTS_KEPT = 16  # spend charts kept by their figures (~40 KB each)
# Hour states on a receipt's chart (bot/domain/hours.py), in legend order, with their colours.
HOUR_COLOURS = {HourState.BILLED: "#2b6cb0", HourState.DEGRADED: "#dd6b20",
                HourState.NOT_SERVING: "#805ad5", HourState.NOT_BILLED: "#cbd5e0"}
_PALETTE = ("#2b6cb0", "#dd6b20", "#38a169", "#e53e3e", "#805ad5", "#d69e2e", "#319795",
            "#d53f8c", "#4a5568", "#718096", "#a0aec0")


def _figure(height: float = HEIGHT, *, constrained: bool = False) -> Figure:
    from matplotlib.figure import Figure

    # Fixed margins by default: the constrained layout engine costs a third of the drawing.
    return Figure(figsize=(WIDTH, height), dpi=DPI,
                  layout="constrained" if constrained else None)


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    # The Agg canvas: no display, no pyplot (a kept figure keeps its canvas and renderer).
    fig.savefig(buffer, format="png")
    return buffer.getvalue()


def _dollars(cents: float, _: Any = None) -> str:
    return f"${cents / 100:,.0f}"


def _cents(cents: int) -> str:
    return f"${cents / 100:,.2f}"


def spend_png(*, month: str, days: Sequence[tuple[date, int]],
              owners: Sequence[tuple[str, int]], total_cents: int,
              group: str = "owner") -> bytes:
    """The month by day (bars) and by owner (horizontal bars, the largest `OWNERS_SHOWN`,
    the rest as one bar). The title states the total to the cent (the report's figure)."""
    return _spend_png(month, tuple(days), tuple(owners), total_cents, group)


@lru_cache(maxsize=CHARTS_KEPT)
def _spend_png(month: str, days: tuple[tuple[date, int], ...],
               owners: tuple[tuple[str, int], ...], total_cents: int, group: str) -> bytes:
    global _kept
    with _drawing:  # one drawing at a time on the kept figure (worker threads)
        chart, _kept = _kept or _SpendChart(), None
        chart.show(month=month, days=days, owners=owners, total_cents=total_cents, group=group)
        png = _png(chart.fig)
        _kept = chart  # kept only once drawn whole: a drawing that raised starts afresh
    return png


def forget_charts() -> None:
    """Drop the kept PNGs: the next chart is drawn whatever its figures (the benchmark)."""
    _spend_png.cache_clear()


def spend_figure(*, month: str, days: Sequence[tuple[date, int]],
                 owners: Sequence[tuple[str, int]], total_cents: int,
                 group: str = "owner") -> Figure:
    """`spend_png`'s figure, before it is drawn (a figure of its own, not the kept one)."""
    chart = _SpendChart()
    chart.show(month=month, days=days, owners=owners, total_cents=total_cents, group=group)
    return chart.fig


class _SpendChart:
    """The spend chart's figure: axes, ticks, labels, formatters and grid made once; `show`
    puts one month's bars, labels and limits on it, taking away the last month's.

    Drawing a figure the first time costs twice what drawing it again does (every tick, text
    metric and transform made anew), so `spend_png` keeps one and draws each month on it,
    under `_drawing`: a figure is not safe to share between threads. Each month draws the very
    pixels a figure of its own draws (tests/test_charts.py)."""

    def __init__(self) -> None:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.ticker import FuncFormatter

        self.fig = fig = _figure()
        FigureCanvasAgg(fig)  # the figure's canvas from now on
        fig.subplots_adjust(left=0.12, right=0.97, top=0.88, bottom=0.12, wspace=0.45)
        self.by_day, self.by_owner = by_day, by_owner = fig.subplots(1, 2, width_ratios=(2.2, 1))
        by_day.set_xlabel("day of the month (UTC)")
        by_day.set_ylabel("charged that day (USD)")
        # A fixed title height (where matplotlib would put it anyway: no ticks are above the
        # axes) spares measuring every tick label to place it, on every drawing.
        by_day.set_title("by day", y=1.0)
        by_day.yaxis.set_major_formatter(FuncFormatter(_dollars))
        by_day.grid(axis="y", alpha=0.3)
        by_owner.xaxis.set_major_formatter(FuncFormatter(_dollars))
        by_owner.tick_params(axis="x", labelrotation=30)
        by_owner.grid(axis="x", alpha=0.3)
        self._shown: list[Any] = []  # what `show` put on the axes

    def show(self, *, month: str, days: Sequence[tuple[date, int]],
             owners: Sequence[tuple[str, int]], total_cents: int, group: str) -> None:
        by_day, by_owner = self.by_day, self.by_owner
        for artist in self._shown:
            artist.remove()
        by_day.relim()  # the limits of the bars left: none
        by_owner.relim()
        self.fig.suptitle(f"AI Reserve spend {month}: {_cents(total_cents)}", fontsize=14)
        numbers = [d.day for d, _ in days]
        day_bars = by_day.bar(numbers, [c for _, c in days], color=_PALETTE[0], width=0.8)
        by_day.set_xlim(0.4, max(numbers, default=1) + 0.6)

        shown = list(owners[:OWNERS_SHOWN])
        rest = sum(c for _, c in owners[OWNERS_SHOWN:])
        if rest:
            shown.append((f"{len(owners) - OWNERS_SHOWN} others", rest))
        labels = [label for label, _ in shown][::-1]
        values = [cents for _, cents in shown][::-1]
        colours = [_PALETTE[i % len(_PALETTE)] for i in range(len(shown))][::-1]
        # One bar per row at 0, 1, … named by its tick: two owners of the same name are two
        # bars (categorical labels would fold them into one).
        rows = range(len(shown))
        owner_bars = by_owner.barh(rows, values, color=colours)
        by_owner.set_yticks(rows, labels)
        # Each bar says its figure, so a small one (a few cents of an unclaimed volume beside
        # thousands of dollars) is still seen and read.
        figures = by_owner.bar_label(owner_bars, labels=[_cents(v) for v in values], padding=3,
                                     fontsize=8)
        by_owner.set_xlim(0, max(values, default=1) * 1.35 or 1)
        by_owner.set_title(f"by {group}", y=1.0)
        self._shown = [day_bars, owner_bars, *figures]


_drawing = threading.Lock()
_kept: _SpendChart | None = None


def hours_png(*, title: str, hours: Sequence[tuple[datetime, HourState]]) -> bytes:
    """One cell per hour mark from ready to the end, coloured by its state (`HOUR_COLOURS`):
    what was billed, what was billed while degraded or not serving, what was not billed."""
    return _png(hours_figure(title=title, hours=hours))


def hours_figure(*, title: str, hours: Sequence[tuple[datetime, HourState]]) -> Figure:
    """`hours_png`'s figure, before it is drawn: whole hours on the axis, never half ones."""
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator

    fig = _figure(height=3.0, constrained=True)
    axes = fig.subplots()
    axes.set_title(title, fontsize=12)
    n = len(hours)
    axes.barh([0] * n, [1] * n, left=list(range(n)), height=0.8,
              color=[HOUR_COLOURS[state] for _, state in hours],
              edgecolor="white", linewidth=0.5 if n < 200 else 0)
    axes.set_xlim(0, max(len(hours), 1))
    axes.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_yticks([])
    axes.set_xlabel("hour since ready (each cell is one hourly charge mark)")
    seen = [s for s in HOUR_COLOURS if any(state == s for _, state in hours)]
    axes.legend(handles=[Patch(color=HOUR_COLOURS[s], label=s) for s in seen],
                loc="upper center", bbox_to_anchor=(0.5, -0.35), ncols=max(len(seen), 1),
                frameon=False)
    return fig
