"""`cluster-bot` (also `python -m bot`): serve, run, simulator, migrate, db status,
audit-export.

Settings are read and checked here, once; a problem prints one line per setting and exits 2.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import signal
import sys
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path

from bot.app import devtools
from bot.clock import SystemClock
from bot.config.settings import CannotListen, ConfigError, Settings, load_settings
from bot.logs import configure_logging
from bot.observability.build import describe
from bot.slack.acks_first import AcksFirstLoop

__all__ = ["configure_logging", "main"]

def _settings() -> Settings:
    try:
        return load_settings()
    except ConfigError as exc:
        _die(exc)
        raise  # unreachable


def _die(exc: ConfigError) -> None:
    for problem in exc.problems:
        print(f"cluster-bot: configuration: {problem}", file=sys.stderr)  # noqa: T201
    print("cluster-bot: see .env.example for every setting", file=sys.stderr)  # noqa: T201
    raise SystemExit(2)


class OffsetFileClock:
    """The wall clock plus the seconds written in a file (CLOCK_OFFSET_FILE; tests and demos).

    Re-read whenever the file changes, so several bot processes move forward together."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._seen: int | None = None
        self._offset = timedelta()

    def now(self) -> datetime:
        try:
            changed = self._path.stat().st_mtime_ns
            if changed != self._seen:
                self._offset = timedelta(seconds=float(self._path.read_text() or 0))
                self._seen = changed
        except (OSError, ValueError):
            pass  # missing or half-written: keep the last offset
        return SystemClock().now() + self._offset


async def _serve(settings: Settings) -> None:
    """Serve until SIGTERM or SIGINT, then stop gracefully (runtime.start's exit) and return."""
    from bot.app import runtime

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, _stopping, sig, stop)
    clock = OffsetFileClock(settings.clock_offset_file) if settings.clock_offset_file else None
    async with runtime.start(settings, clock=clock) as rt:
        loop.add_signal_handler(signal.SIGHUP, _reload, rt)
        try:
            await runtime.serve(rt, stop=stop)
        finally:
            loop.remove_signal_handler(signal.SIGHUP)
    logging.getLogger("bot.app.cli").info("stopped")


def _stopping(sig: signal.Signals, stop: asyncio.Event) -> None:
    logging.getLogger("bot.app.cli").info("%s: no new work; finishing what runs, then exiting",
                                      sig.name)
    stop.set()


def _reload(rt: object) -> None:
    """SIGHUP: check the policy file again and use it if it is sound, and read the bot token's
    file again (bot/app/reload.py)."""
    from bot.app import reload
    from bot.app.process import Runtime

    assert isinstance(rt, Runtime)
    async def run() -> None:
        await reload.reload_policy(rt)
        await reload.reload_token(rt)

    task = asyncio.get_running_loop().create_task(run(), name="reload")
    rt.background.add(task)
    task.add_done_callback(rt.background.discard)


def cmd_serve(_: argparse.Namespace) -> int:
    settings = _settings()
    problems: list[str] = []
    for check in (settings.require_slack, lambda: require_provider(settings),
                  lambda: check_policy(settings)):
        try:
            check()
        except ConfigError as exc:
            problems += exc.problems
    if problems:
        _die(ConfigError(problems))
    configure_logging(settings.log_level, settings.log_format)
    from storage.schema import SchemaIncompatible

    try:
        # Acks first: the work after them takes its turns behind them (bot/slack/acks_first.py).
        with contextlib.suppress(KeyboardInterrupt), \
                asyncio.Runner(loop_factory=AcksFirstLoop) as runner:
            runner.run(_serve(settings))
    except (CannotListen, SchemaIncompatible) as exc:
        print(f"cluster-bot: {exc}", file=sys.stderr)  # noqa: T201
        return 2
    return 0


def require_provider(settings: Settings) -> None:
    """For `serve`: a real AI Reserve, or the embedded simulator asked for by name — and
    installed here."""
    settings.require_provider()
    if settings.uses_simulator:
        try:
            devtools.require(devtools.SIMULATOR, "AIRESERVE_SIMULATOR=embedded",
                             "; set AIRESERVE_API_URL and AIRESERVE_API_KEY")
        except devtools.DevToolMissing as exc:
            raise ConfigError([str(exc)]) from None


def check_policy(settings: Settings) -> None:
    """A malformed policy file stops the bot at start, with the line and the problem."""
    from bot.config.policy_file import PolicyError, load_policy

    if settings.policy_file is None:
        return
    try:
        load_policy(settings.policy_file)
    except PolicyError as exc:
        raise ConfigError([f"POLICY_FILE {p}" for p in exc.problems]) from None
    except OSError as exc:
        raise ConfigError([f"POLICY_FILE {settings.policy_file}: {exc.strerror}"]) from None


def cmd_run(args: argparse.Namespace) -> int:
    settings = _settings()
    if settings.has_slack_credentials:
        return cmd_serve(args)
    try:
        local = devtools.load("devslack.local", "`run` without Slack credentials (SLACK_BOT_TOKEN "
                              "…): the local Slack workspace", "; use `serve`")
    except devtools.DevToolMissing as exc:
        return _refuse(exc)
    gc.enable()  # `serve` turns it on once listening; the local workspace doesn't serve
    try:
        check_policy(settings)
    except ConfigError as exc:
        _die(exc)
    from storage.schema import SchemaIncompatible

    try:
        code: int = local.run_local(settings)  # no Slack credentials: a local workspace here
    except SchemaIncompatible as exc:
        return _refuse(exc)
    return code


def _refuse(exc: Exception) -> int:
    print(f"cluster-bot: {exc}", file=sys.stderr)  # noqa: T201
    return 2


def cmd_migrate(_: argparse.Namespace) -> int:
    """Apply this build's migrations. Two at once: the second waits for the first (a lock, see
    storage/db.py) and finds nothing left; a database ahead of this build is left alone (exit
    0 when this build runs on it, else one line and exit 2)."""
    from storage.db import Database
    from storage.schema import SchemaIncompatible

    settings = _settings()

    async def migrate() -> None:
        db = Database(settings.database_url)
        try:
            await db.migrate()
        finally:
            await db.dispose()

    try:
        asyncio.run(migrate())
    except SchemaIncompatible as exc:
        print(f"cluster-bot: migrate: {exc}", file=sys.stderr)  # noqa: T201
        return 2
    return 0


def cmd_db_status(_: argparse.Namespace) -> int:
    from bot.observability import dbstatus

    return dbstatus.run(_settings().database_url, version=describe())


async def _export_month(database_url: str, *, month: str | None) -> str:
    """The CSV of `month` (None: this month, UTC), read straight from the database.

    It never creates or migrates a database: a wrong DATABASE_URL must not answer with an empty
    export (exit 0) and a new empty file beside the real one."""
    import sqlite3

    from sqlalchemy.exc import DBAPIError

    from bot.domain import spend
    from bot.domain.audit_csv import to_csv
    from storage.db import Database
    from storage.migrations import head_revision

    start, end = spend.month_bounds(month, SystemClock().now())  # ValueError: not a month
    db = Database(database_url)
    try:
        try:  # read-only for a SQLite file: not even a header is written to a stranger
            versions = await db.schema_versions()
        except (sqlite3.Error, DBAPIError):  # no alembic_version table: not the bot's schema
            versions = []
        # A database a newer build migrated, by revisions this build runs on, is readable too.
        if versions and versions != [head_revision()]:
            status = await db.schema_status()
            if status.ahead and status.runnable:
                versions = [head_revision()]
        if versions != [head_revision()]:
            raise ValueError("the database has no bot schema at this build's revision (run "
                             "`cluster-bot migrate` against the right DATABASE_URL); nothing "
                             "was exported")
        async with db.transaction() as repos:
            entries = await repos.audit.in_period(start, end)
            projects = await repos.projects.of_subjects([e.subject_id for e in entries])
    finally:
        await db.dispose()
    return to_csv(entries, projects)


def cmd_audit_export(args: argparse.Namespace) -> int:
    """The month's audit trail as CSV (the columns: bot/audit_csv.py), to a file or stdout."""
    from storage.db import sqlite_path

    settings = _settings()
    path = sqlite_path(settings.database_url)
    try:
        if path is not None and not Path(path).is_file():
            raise ValueError(f"no database at {path} (DATABASE_URL); nothing was exported")
        text = asyncio.run(_export_month(settings.database_url, month=args.month))
    except (ValueError, OSError) as exc:
        print(f"cluster-bot: audit-export: {exc}", file=sys.stderr)  # noqa: T201
        return 2
    if args.out == "-":
        sys.stdout.write(text)
    else:
        Path(args.out).write_text(text, encoding="utf-8", newline="")
    return 0


def cmd_new_key(_: argparse.Namespace) -> int:
    """A new WORKLOAD_KEY (a Fernet key) on stdout: with the bot's own `cryptography`, so the
    host's Python needs none."""
    from cryptography.fernet import Fernet

    print(Fernet.generate_key().decode())  # noqa: T201
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="cluster-bot", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {describe()}")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("serve", help="connect to Slack (HTTP or Socket Mode)").set_defaults(
        func=cmd_serve)
    sub.add_parser("run", help="serve with Slack credentials, else a local Slack in this "
                   "terminal").set_defaults(func=cmd_run)
    sim = sub.add_parser("simulator", help="the AI Reserve simulator on its own (development)")
    if not devtools.add_simulator_command(sim):
        sim.set_defaults(func=lambda _args: _refuse(devtools.DevToolMissing(
            devtools.SIMULATOR, "`cluster-bot simulator`")))
    sub.add_parser("migrate", help="apply database migrations").set_defaults(func=cmd_migrate)
    database = sub.add_parser("db", help="the database's schema").add_subparsers(
        dest="db_command", required=True)
    database.add_parser("status", help="the revision, this build's head, pending or ahead "
                        "revisions, and whether this build can run on it (exit 0 yes, 3 after "
                        "migrating, 2 no)").set_defaults(func=cmd_db_status)
    sub.add_parser("new-key", help="print a new key for WORKLOAD_KEY (or "
                   "WORKLOAD_KEY_PREVIOUS's successor)").set_defaults(func=cmd_new_key)
    export = sub.add_parser("audit-export", help="a month's audit trail as CSV")
    export.add_argument("--month", default=None, help="YYYY-MM (default: this month, UTC)")
    export.add_argument("--out", default="-", help="the CSV file to write (default: stdout)")
    export.set_defaults(func=cmd_audit_export)
    args = parser.parse_args(argv)
    if args.func not in (cmd_serve, cmd_run):
        gc.enable()  # off since bot/__main__.py; `serve` turns it on once listening
    code: int = args.func(args)
    return code
