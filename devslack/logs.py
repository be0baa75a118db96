"""The bot's own log lines beside the local workspace, with repeats folded.

A poll that fails every five seconds logs the same warning every five seconds: a two-hour
provider outage under `sim advance 2h` was 1,440 lines in the terminal. `FoldedLog` writes the
first line of a kind (same logger, level and message template) and counts the rest until
`flush_repeats()` — which the terminal calls after each line it runs — sums them up in one line.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import TextIO

FORMAT = "%(levelname)s %(name)s: %(message)s"

Kind = tuple[str, int, str]  # logger, level, message template


@dataclass
class _Folded:
    count: int = 0
    last: str = ""


class FoldedLog(logging.Handler):
    """A handler writing to `stream`; a record of a kind already written since the last
    `flush_repeats()` is counted, not written."""

    def __init__(self, stream: TextIO, level: int = logging.WARNING) -> None:
        super().__init__(level)
        self.stream = stream
        self.setFormatter(logging.Formatter(FORMAT))
        self._seen: dict[Kind, _Folded] = {}
        self._guard = threading.Lock()  # records come from threads too (aiosqlite, to_thread)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
            kind = (record.name, record.levelno, str(record.msg))
            with self._guard:
                folded = self._seen.get(kind)
                if folded is None:
                    self._seen[kind] = _Folded()
                else:
                    folded.count += 1
                    folded.last = line
                    return
            self._write(line)
        except Exception:  # as logging's own handlers do: a broken log line never raises
            self.handleError(record)

    def flush_repeats(self) -> list[str]:
        """Sum up what was folded since the last call (one line per kind), and start over:
        the next record of any kind is written again. Returns the lines written."""
        with self._guard:
            seen, self._seen = self._seen, {}
        lines = [f"  … and {f.count:,} more like it (the last: {f.last})"
                 for f in seen.values() if f.count]
        for line in lines:
            self._write(line)
        return lines

    def _write(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()
