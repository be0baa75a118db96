"""Where the suite's CPU goes: `-p tests.cpu_report` (or `make test-cpu`) records, per test, its
wall time and the CPU it cost — the worker's own and that of the processes it started and reaped
(real bot and simulator processes, PostgreSQL's initdb, podman) — and prints a summary by kind
when the run ends; `CPU_REPORT=path.json` keeps every row (issue 32: the suite is bound by CPU
on two cores, so CPU, not wall time, says what a test costs).

Not counted: what no test reaps (the session's PostgreSQL server, started once per worker) and a
Debian root's processes that outlive their test's reap. A benchmark, not a test: it never fails.
"""

from __future__ import annotations

import json
import os
import resource
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# The kinds the summary adds up, first match wins (what a change to the suite's shape moves).
BOUNDARY = ("test_upgrade_releases", "test_rollback_releases", "test_image.py",
            "test_operations_doc.py", "test_browser.py")
KINDS: tuple[tuple[str, Callable[[str], bool]], ...] = (
    ("real processes", lambda test: "@procs" in test),
    ("releases, image, guide, browser", lambda test: any(part in test for part in BOUNDARY)),
    ("ledger", lambda test: "test_ledger_figures" in test),
    ("in-process, PostgreSQL", lambda test: "postgres" in test),
    ("in-process e2e / saga, SQLite", lambda test: test.startswith(("tests/e2e", "tests/saga"))),
    ("the rest", lambda test: True),
)
_ROWS_DIR = "CPU_REPORT_ROWS"  # where the workers leave their rows for the controller
Row = tuple[str, float, float]  # the test, its wall time, its CPU (seconds)
_rows = pytest.StashKey[list[Row]]()


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    began = time.monotonic()
    own, children = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
    yield
    cpu = _cpu(resource.RUSAGE_SELF) - own + _cpu(resource.RUSAGE_CHILDREN) - children
    item.config.stash.setdefault(_rows, []).append((item.nodeid, time.monotonic() - began, cpu))


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput") and _ROWS_DIR not in os.environ:
        os.environ[_ROWS_DIR] = tempfile.mkdtemp(prefix="cpu-report-")  # the workers inherit it


def pytest_sessionfinish(session: pytest.Session) -> None:
    worker = getattr(session.config, "workerinput", {}).get("workerid", "main")
    rows = session.config.stash.get(_rows, [])
    (Path(os.environ[_ROWS_DIR]) / f"{worker}.json").write_text(json.dumps(rows))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if hasattr(terminalreporter.config, "workerinput"):
        return
    rows: list[Row] = [tuple(row) for path in sorted(Path(os.environ[_ROWS_DIR]).glob("*.json"))
                       for row in json.loads(path.read_text())]  # type: ignore[misc]
    if out := os.environ.get("CPU_REPORT"):
        Path(out).write_text(json.dumps(rows))
    terminalreporter.write_line(summary(rows))


def summary(rows: list[Row]) -> str:
    """The CPU by kind of test, and the costliest tests."""
    kinds: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for test, wall, cpu in rows:
        kind = kinds[next(name for name, match in KINDS if match(test))]
        kind[0] += 1
        kind[1] += wall
        kind[2] += cpu
    total = sum(kind[2] for kind in kinds.values()) or 1.0
    lines = ["", f"CPU by kind of test ({total:.0f} s in all): tests, wall over workers, CPU"]
    lines += [f"  {name:32} {kinds[name][0]:5.0f} {kinds[name][1]:7.0f} s {kinds[name][2]:7.0f} s"
              f" {kinds[name][2] / total:6.1%}" for name, _ in KINDS if name in kinds]
    lines.append("The costliest tests: CPU, wall")
    lines += [f"  {cpu:6.1f} s {wall:6.1f} s  {test}"
              for test, wall, cpu in sorted(rows, key=lambda row: -row[2])[:15]]
    return "\n".join(lines)
