"""The launch saga's crash matrix: a launch killed at each step × each provider mode.

Each cell is tests/saga/crash.py's scenario, in process, on a SQLite file: the launch task dies
at the kill point, another replica's sweep runs, the runtime is dropped and a new one starts on
the same database and simulator; a re-priced request is approved again; the cluster boots and
is polled. The figures: clusters per request (the most any request got), clusters not linked to
their request and owner, SSH-details DMs per cluster. A cell holds when all three are 1, 0, 1.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from benchmarks.report import Table
from tests.saga.crash import MODES, POINTS, Outcome, run


async def _cells() -> list[tuple[Outcome, float]]:
    done = []
    for point in POINTS:
        for mode in MODES:
            with tempfile.TemporaryDirectory() as tmp:
                began = time.perf_counter()
                outcome = await run(Path(tmp), point=point, mode=mode)
                done.append((outcome, time.perf_counter() - began))
    return done


async def run_bench() -> list[Table]:
    cells = await _cells()
    table = Table(
        "Launch saga crash matrix (in process, SQLite): kill point × provider mode",
        ["kill point", "mode", "clusters/request", "unlinked", "SSH DMs/cluster",
         "re-priced", "held", "s"],
    )
    for outcome, seconds in cells:
        dms = sorted(outcome.ssh_dms.values()) or [0]
        table.rows.append([outcome.point, outcome.mode, str(outcome.per_request_max),
                           str(outcome.unlinked), "/".join(map(str, dms)),
                           "yes" if outcome.repriced else "no",
                           "yes" if outcome.held else "NO", f"{seconds:.1f}"])
    held = sum(o.held for o, _ in cells)
    table.notes += [
        f"{len(POINTS)} kill points × {len(MODES)} modes: {len(cells)} tried, {held} held "
        f"(1 cluster per request, 0 unlinked, 1 SSH DM per cluster)",
        f"clusters per request (max) {max(o.per_request_max for o, _ in cells)}; unlinked "
        f"clusters {sum(o.unlinked for o, _ in cells)}; SSH DMs per cluster (max) "
        f"{max(max(o.ssh_dms.values(), default=0) for o, _ in cells)}",
        "modes: fast; slow = the launch's answer held 1 s (real time); expired = the quote "
        "expired while the bot was down (16 min)",
    ]
    return [table]
