"""What every benchmark shares: percentiles, counters of side effects, and the report table."""

from __future__ import annotations

import gc
import math
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine

from devslack.models import ApiCall
from devslack.webapi import FakeSlack

# FakeSlack records these next to Web API calls; they are not calls the bot made to the API.
NOT_WEB_API = frozenset({"ack", "response_url", "scheduled_message"})


def percentile(samples: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile (p100 is the max); NaN for no samples."""
    if not samples:
        return math.nan
    ordered = sorted(samples)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


def ms(seconds: float) -> str:
    return "n/a" if math.isnan(seconds) else f"{seconds * 1000:.1f}"


@dataclass
class Table:
    """One block of the report: a title, column headers, rows of text, and notes below."""

    title: str
    headers: Sequence[str]
    rows: list[Sequence[str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def render(self) -> str:
        cells = [list(self.headers), *[list(r) for r in self.rows]]
        widths = [max(len(row[i]) for row in cells) for i in range(len(self.headers))]

        def line(row: Sequence[str]) -> str:
            first, *rest = row
            return "  " + "  ".join([first.ljust(widths[0]),
                                     *(c.rjust(w) for c, w in zip(rest, widths[1:], strict=True))])

        out = [self.title, line(self.headers),
               "  " + "  ".join("-" * w for w in widths)]
        out += [line(r) for r in self.rows]
        out += [f"  * {n}" for n in self.notes]
        return "\n".join(out)


@contextmanager
def slack_calls(slack: FakeSlack) -> Iterator[Counter[str]]:
    """Count the Web API calls the bot makes to `slack` inside the block, by method."""
    seen: Counter[str] = Counter()

    def on_call(call: ApiCall) -> None:
        if call.method not in NOT_WEB_API:
            seen[call.method] += 1

    unsubscribe = slack.subscribe(on_call)
    try:
        yield seen
    finally:
        unsubscribe()


@dataclass
class DbCount:
    statements: int = 0
    transactions: int = 0
    kinds: Counter[str] = field(default_factory=Counter)  # by SQL verb: SELECT, UPDATE …


@contextmanager
def db_statements(engine: AsyncEngine) -> Iterator[DbCount]:
    """Count SQL statements (BEGIN included) and transactions run on `engine` in the block."""
    count = DbCount()
    sync = engine.sync_engine

    def on_execute(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        count.statements += 1
        verb = statement.lstrip().split(None, 1)
        count.kinds[verb[0].upper() if verb else "?"] += 1

    def on_begin(*_: Any) -> None:
        count.transactions += 1

    event.listen(sync, "before_cursor_execute", on_execute)
    event.listen(sync, "begin", on_begin)
    try:
        yield count
    finally:
        event.remove(sync, "before_cursor_execute", on_execute)
        event.remove(sync, "begin", on_begin)


@contextmanager
def counting_calls(target: object, names: Sequence[str]) -> Iterator[Counter[str]]:
    """Count calls of the methods `names` on the object `target` (instance-level wrappers).

    Whoever holds `target` (e.g. the watcher holding the provider client) calls the wrappers,
    which are removed again on exit.
    """
    seen: Counter[str] = Counter()

    def wrap(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            seen[name] += 1
            return method(*args, **kwargs)
        return counted

    for name in names:
        setattr(target, name, wrap(name, getattr(target, name)))
    try:
        yield seen
    finally:
        for name in names:
            delattr(target, name)


@contextmanager
def gc_pauses() -> Iterator[list[tuple[int, float]]]:
    """The garbage collector's pauses inside the block: (generation, seconds) each."""
    pauses: list[tuple[int, float]] = []
    started: list[float] = []

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[:] = [time.perf_counter()]
        elif started:
            pauses.append((int(info["generation"]), time.perf_counter() - started[0]))

    gc.callbacks.append(on_gc)
    try:
        yield pauses
    finally:
        gc.callbacks.remove(on_gc)
