"""`python -m benchmarks [ack] [ackcpu] [burst] [sweep] [storage] [envelope] [saga] [replicas]
[scale] [charts] [stock] [storm] [quiet] [first_install]`: run the
benchmarks (all by default), report.

The report goes to stdout; the bot's own log is kept to errors so it doesn't drown the figures
(the sweep benchmark adopts hundreds of clusters, and each adoption is a logged warning).
"""

from __future__ import annotations

import asyncio
import logging
import os
import platform
import sys
import time
from collections.abc import Callable, Coroutine
from typing import Any

from benchmarks import (
    ack,
    ackcpu,
    burst,
    charts,
    envelope,
    first_install,
    quiet,
    replicas,
    saga,
    scale,
    stock,
    storage,
    storm,
    sweep,
)
from benchmarks.report import Table

BENCHMARKS: dict[str, Callable[[], Coroutine[Any, Any, list[Table]]]] = {
    "ack": ack.run,
    "ackcpu": ackcpu.run,
    "burst": burst.run,
    "sweep": sweep.run,
    "storage": storage.run,
    "envelope": envelope.run,
    "saga": saga.run_bench,
    "replicas": replicas.run,
    "scale": scale.run,
    "charts": charts.run,
    "stock": stock.run,
    "storm": storm.run,
    "quiet": quiet.run,
    "first_install": first_install.run,
}


def main(argv: list[str]) -> int:
    chosen = argv or list(BENCHMARKS)
    unknown = [name for name in chosen if name not in BENCHMARKS]
    if unknown:
        sys.stderr.write(f"unknown benchmark(s) {', '.join(unknown)}; "
                         f"choose from {', '.join(BENCHMARKS)}\n")
        return 2
    logging.basicConfig(level=logging.ERROR, format="%(levelname)s %(name)s: %(message)s")
    out = sys.stdout
    out.write(f"cluster-bot benchmarks — Python {platform.python_version()}, "
              f"{os.cpu_count()} CPU(s), {platform.system()} {platform.machine()}\n\n")
    started = time.perf_counter()
    for name in chosen:
        began = time.perf_counter()
        tables = asyncio.run(BENCHMARKS[name]())
        for table in tables:
            out.write(table.render() + "\n")
        out.write(f"  ({name}: {time.perf_counter() - began:.1f} s)\n\n")
        out.flush()
    out.write(f"total {time.perf_counter() - started:.1f} s\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
