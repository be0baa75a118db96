"""Logging: readable text by default, one JSON object per line with LOG_FORMAT=json.

Every line carries the context at hand — the Slack request, the Slack user, the cluster, an
error reference — from a context variable: Bolt's middleware (bot/slack/app.py) `begin`s each
request with its id and user before a listener runs (the listener's task inherits them); the
audited services add the cluster id with `log_context(cluster_id=...)`, the error handler the
reference. Libraries that log request bodies or SQL parameters stay above a floor whatever
LOG_LEVEL says, and APScheduler's per-run lines are dropped.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from types import MappingProxyType
from typing import TextIO

# Libraries that log whole request bodies or SQL parameters (DMs with SSH details, env values):
# never below these levels, whatever LOG_LEVEL says. APScheduler's executor says "Running job"
# and "executed successfully" on every tick (thousands of lines a day): warnings only.
FLOORS = {"slack_sdk": logging.INFO, "slack_bolt": logging.INFO, "aiohttp": logging.INFO,
          "aiosqlite": logging.WARNING, "sqlalchemy": logging.WARNING,
          "apscheduler.executors": logging.WARNING, "apscheduler.scheduler": logging.WARNING}

_BEFORE: dict[str, int] = {}  # each floored logger's level before configure_logging

# The fields a line may carry, in the order they are shown.
FIELDS = ("request_id", "slack_user", "cluster_id", "error_ref")

_CONTEXT: ContextVar[Mapping[str, str]] = ContextVar(
    "clusterbot_log_context", default=MappingProxyType({}))


def current() -> Mapping[str, str]:
    return _CONTEXT.get()


def begin(**fields: str | None) -> None:
    """Start afresh with these fields (a new Slack request): nothing of an earlier one stays,
    even where one task handles many requests (Socket Mode)."""
    _CONTEXT.set(MappingProxyType({k: v for k, v in fields.items() if v}))


@contextmanager
def log_context(**fields: str | None) -> Iterator[None]:
    """Add fields for the lines logged inside the block."""
    token = _CONTEXT.set({**_CONTEXT.get(), **{k: v for k, v in fields.items() if v}})
    try:
        yield
    finally:
        _CONTEXT.reset(token)


class ContextFilter(logging.Filter):
    """Copies the context onto each record (`record.context`), for either formatter."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "context"):
            record.context = dict(_CONTEXT.get())
        return True


def _context_of(record: logging.LogRecord) -> Mapping[str, str]:
    context = getattr(record, "context", None)
    return context if isinstance(context, Mapping) else _CONTEXT.get()


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            **_context_of(record),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        context = _context_of(record)
        if not context:
            return text
        tags = " ".join(f"{k}={context[k]}" for k in FIELDS if k in context)
        first, _, rest = text.partition("\n")
        return f"{first} [{tags}]" + (f"\n{rest}" if rest else "")


class _BotHandler(logging.StreamHandler[TextIO]):
    """The handler `configure_logging` installs (replaced, not stacked, when called again)."""


def formatter(fmt: str) -> logging.Formatter:
    return JsonFormatter() if fmt == "json" else TextFormatter()


def configure_logging(level: str, fmt: str = "text", *, stream: TextIO | None = None) -> None:
    unconfigure_logging()
    root = logging.getLogger()
    handler = _BotHandler(stream or sys.stderr)
    handler.setFormatter(formatter(fmt))
    handler.addFilter(ContextFilter())
    root.addHandler(handler)
    root.setLevel(level)
    for name, floor in FLOORS.items():
        _BEFORE.setdefault(name, logging.getLogger(name).level)
        logging.getLogger(name).setLevel(max(logging.getLevelName(level), floor))


def unconfigure_logging() -> None:
    """Undo `configure_logging` (tests): its handler, the root level, the floors — each logger
    back to the level it had (SQLAlchemy sets its own to WARNING at import: left at NOTSET, a
    later debug-level root would log every row a query returns, decrypted values included)."""
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _BotHandler)]:
        root.removeHandler(old)
        root.setLevel(logging.WARNING)
    for name, before in _BEFORE.items():
        logging.getLogger(name).setLevel(before)
    _BEFORE.clear()
