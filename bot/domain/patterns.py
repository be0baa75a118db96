"""Workload log patterns (readiness and idle rules): compiled by RE2, a linear-time engine.

A person types these patterns and the bot runs them on every new log line of every watched
cluster, so one pattern must never be able to stall the sweep. Python's `re` backtracks: a
pattern like `(a+)+b` takes exponential time on a line of `a`s. RE2 matches in time linear in
the line for every pattern it accepts, and refuses the constructs that need backtracking
(backreferences, lookarounds) — those are refused in the form with that reason. Lines are cut
to `MATCH_CHARS` before matching, and the services run the matching off the event loop with a
time limit (bot/services/logfollow.py), so a huge log cannot delay another cluster's watch.
"""

from __future__ import annotations

import functools
from typing import Protocol, cast

import re2  # type: ignore[import-untyped]

MAX_PATTERN = 300
MATCH_CHARS = 2000  # a pattern only sees this much of one line


class Compiled(Protocol):
    def search(self, text: str) -> object | None: ...


def _options() -> object:
    options = re2.Options()
    options.log_errors = False  # a refused pattern is answered in the form, not on stderr
    return options


_OPTIONS = _options()
_BACKTRACKING = ("\\1", "\\2", "\\3", "(?=", "(?!", "(?<=", "(?<!", "(?P=")


def problem(pattern: str) -> str | None:
    """Why `pattern` can't be a log rule (None: it can), in words for the form."""
    if not pattern:
        return "An empty pattern matches every line."
    if len(pattern) > MAX_PATTERN:
        return f"A pattern is at most {MAX_PATTERN} characters."
    try:
        compiled(pattern)
    except re2.error as exc:
        detail = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) \
            else str(exc)
        if any(token in pattern for token in _BACKTRACKING):
            return (f"`{pattern[:60]}` needs backtracking (a backreference or a lookaround), "
                    "which could take super-linear time on a long line; write it without.")
        return f"`{pattern[:60]}` is not a valid pattern: {detail}."
    return None


@functools.lru_cache(maxsize=1024)
def compiled(pattern: str) -> Compiled:
    """The pattern compiled once (raises `re2.error` for one `problem` refuses)."""
    return cast(Compiled, re2.compile(pattern, options=_OPTIONS))


def search(pattern: str, line: str) -> bool:
    """Does `pattern` occur in the first MATCH_CHARS of `line`? A pattern stored before RE2
    checked it and that RE2 refuses matches nothing (it never could run safely)."""
    try:
        return compiled(pattern).search(line[:MATCH_CHARS]) is not None
    except re2.error:
        return False
