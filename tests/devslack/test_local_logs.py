"""`make run`'s terminal shows the bot's own warnings on stderr, a warning that repeats written
once per typed line: a provider outage under `sim advance` printed one line per poll (a 2-hour
outage, 1,440 lines)."""

from __future__ import annotations

import io
import logging
import sys

from aireserve_sim.engine import SimulatorEngine
from bot.config.settings import load_settings
from bot.reserve.errors import InternalError
from devslack.local import run_local


def test_an_outage_under_sim_advance_prints_its_warning_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    root = logging.getLogger()
    # A fresh process, as `make run` starts: no handler yet (pytest's own are put back after).
    monkeypatch.setattr(root, "handlers", [])
    monkeypatch.setattr(root, "level", root.level)

    def down(self, statuses=None):
        raise InternalError("AI Reserve is down for maintenance")

    monkeypatch.setattr(SimulatorEngine, "listed_clusters", down)
    stderr, stdout = io.StringIO(), io.StringIO()
    # 3 minutes: the advance's own failed polls (+5 s … +180 s) outlast the 120 s budget by
    # themselves. With 2 (+5 … +120 s) the line came only if the scheduler's start-up sweep had
    # failed before the advance began, which a loaded machine does not promise (issue 32).
    monkeypatch.setattr(sys, "stdin", io.StringIO("sim advance 3m\nquit\n"))
    monkeypatch.setattr(sys, "stdout", stdout)
    monkeypatch.setattr(sys, "stderr", stderr)
    settings = load_settings({"DATABASE_URL": f"sqlite:///{tmp_path / 'bot.db'}"})

    assert run_local(settings) == 0

    shown = stdout.getvalue() + stderr.getvalue()
    # 36 steps, the poll failing at each: one line for the outage (AI Reserve's reachability,
    # once its budget is spent), none per poll (issue 24 item 4), nothing folded to say.
    warned = [line for line in shown.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert len(warned) == 1, shown[-3000:]
    assert "AI Reserve: unreachable for" in warned[0] and "said once" in warned[0], warned
    assert "listing clusters failed" not in shown, shown[-3000:]
    assert "AI Reserve's clock is now" in stdout.getvalue()
    assert root.handlers == []  # the session's handler is gone with it


def test_a_folded_log_writes_each_kind_once_per_line_typed():
    from devslack.logs import FoldedLog

    stream = io.StringIO()
    log = logging.getLogger("tests.folded")
    handler = FoldedLog(stream)
    log.addHandler(handler)
    try:
        for attempt in range(5):
            log.warning("listing clusters failed: %s", f"attempt {attempt}")
        log.warning("something else")
        log.info("not shown: below WARNING")
        assert handler.flush_repeats() == [
            "  … and 4 more like it (the last: WARNING tests.folded: listing clusters failed: "
            "attempt 4)"]
        log.warning("listing clusters failed: %s", "again")  # a new line typed: shown again
    finally:
        log.removeHandler(handler)
    assert stream.getvalue().splitlines() == [
        "WARNING tests.folded: listing clusters failed: attempt 0",
        "WARNING tests.folded: something else",
        "  … and 4 more like it (the last: WARNING tests.folded: listing clusters failed: "
        "attempt 4)",
        "WARNING tests.folded: listing clusters failed: again",
    ]
