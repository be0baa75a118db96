"""A throwaway PostgreSQL server for the tests: one per test session, a fresh database per test.

`PgServer.start()` runs initdb in a new temporary directory (in RAM where possible) and starts
`postgres` on a UNIX socket in that directory only (`listen_addresses=''`: no TCP port, nothing
to collide with a parallel session or a real server). Durability is switched off (fsync,
synchronous_commit, full_page_writes): the data is thrown away at the end anyway, and it makes
CREATE DATABASE and every commit cheap.

initdb and postgres refuse to run as root; as root (CI) the server runs as the `postgres`
system user, which must then own the directory. As anyone else it runs as that user.

The server's TimeZone is deliberately not UTC: storage must return the same aware-UTC instants
whatever the server's session zone is, and a UTC server would hide a bug there.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import importlib.util
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

SERVER_USER = "postgres"  # the system user that runs the server when the tests run as root
ROLE = "postgres"  # the database superuser initdb creates
PORT = 5432  # only names the socket file (.s.PGSQL.5432): there is no TCP listener
SERVER_TIMEZONE = "America/St_Johns"  # UTC-03:30 / -02:30: not UTC, not a whole hour either
_SETTINGS = {
    "listen_addresses": "",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "shared_buffers": "16MB",
    "max_connections": "100",
    "timezone": SERVER_TIMEZONE,
}
_START_TIMEOUT_S = 30
T = TypeVar("T")


_SHM = Path("/dev/shm")
_SHM_NEEDED = 512 * 2**20


class PgUnavailable(RuntimeError):
    """PostgreSQL cannot be started here (binaries missing, no server user, initdb failed …)."""


def find_bindir() -> Path:
    """The directory holding initdb, pg_ctl and postgres: $PG_BINDIR if set (and then only
    that), else the one of pg_ctl on PATH, else the newest /usr/lib/postgresql/<version>/bin
    (Debian keeps them off PATH)."""
    candidates: list[Path] = []
    if env := os.environ.get("PG_BINDIR"):
        candidates.append(Path(env))
    else:
        if on_path := shutil.which("pg_ctl"):
            candidates.append(Path(on_path).resolve().parent)
        debian = Path("/usr/lib/postgresql")
        if debian.is_dir():
            versions = sorted((p for p in debian.iterdir() if p.name.isdigit()),
                              key=lambda p: int(p.name), reverse=True)
            candidates += [p / "bin" for p in versions]
    for bindir in candidates:
        if all((bindir / tool).is_file() for tool in ("initdb", "pg_ctl", "postgres")):
            return bindir
    where = f"in PG_BINDIR={env}" if env else "on PATH or in /usr/lib/postgresql"
    raise PgUnavailable(f"initdb/pg_ctl/postgres not found {where} (install the PostgreSQL "
                        "server, e.g. apt-get install postgresql, or set PG_BINDIR)")


def _scratch_dir() -> str | None:
    """Where the cluster lives: RAM (/dev/shm) when it has room, else the usual temp dir.

    On a disk file system, creating and deleting a database's files costs ~200 ms per test
    database even with fsync off; in tmpfs it is ~10 ms.
    """
    try:
        stat = os.statvfs(_SHM)
    except OSError:
        return None
    roomy = stat.f_bavail * stat.f_frsize >= _SHM_NEEDED
    return str(_SHM) if roomy and os.access(_SHM, os.W_OK | os.X_OK) else None


@dataclass
class PgServer:
    """A running throwaway server; `stop()` (idempotent) shuts it down and deletes its files."""

    root: Path
    bindir: Path
    run_as: str | None  # a system user to switch to (we are root), or None: ourselves
    _stopped: bool = field(default=False, init=False)

    @property
    def socket_dir(self) -> Path:
        return self.root

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def log_file(self) -> Path:
        return self.root / "server.log"

    @classmethod
    def start(cls) -> PgServer:
        """initdb + pg_ctl start; PgUnavailable (with the reason) if anything fails."""
        if importlib.util.find_spec("asyncpg") is None:
            raise PgUnavailable("the asyncpg driver is not installed (pip install '.[postgres]')")
        bindir = find_bindir()
        run_as = None
        if os.geteuid() == 0:
            try:
                account = pwd.getpwnam(SERVER_USER)
            except KeyError:
                raise PgUnavailable(f"running as root and there is no {SERVER_USER!r} system "
                                    "user to run the server as") from None
            if shutil.which("runuser") is None:
                raise PgUnavailable("running as root and runuser is missing")
            run_as = account.pw_name
        # Short path: a UNIX socket path must fit in ~107 bytes.
        root = Path(tempfile.mkdtemp(prefix="bot-pg-", dir=_scratch_dir()))
        server = cls(root=root, bindir=bindir, run_as=run_as)
        atexit.register(server.stop)  # should the session end without its teardown
        try:
            if run_as is not None:
                os.chown(root, account.pw_uid, account.pw_gid)
            server._run("initdb", "-D", str(server.data_dir), "-U", ROLE, "-A", "trust",
                        "-E", "UTF8", "--locale=C.UTF-8", "--no-sync", "--no-instructions")
            server.resume()
        except PgUnavailable as exc:
            log = server._log_tail()
            server.stop()
            raise PgUnavailable(f"{exc}{log}") from None
        return server

    def url(self, dbname: str) -> str:
        """The bot's DATABASE_URL for `dbname` (asyncpg takes the socket directory as host)."""
        return f"postgresql://{ROLE}@/{dbname}?host={self.socket_dir}&port={PORT}"

    def create_database(self, *, template: str = "template0") -> str:
        """A new database, a copy of `template` (default: empty); returns its name."""
        name = f"test_{uuid.uuid4().hex[:16]}"
        self._admin(f'CREATE DATABASE "{name}" TEMPLATE "{template}" STRATEGY file_copy')
        return name

    def drop_database(self, name: str) -> None:
        # FORCE: a test that failed before disposing its engine must not keep the drop waiting.
        self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def halt(self) -> None:
        """Stop the server as a restart does (fast shutdown: sessions are ended); `resume()`
        starts it again on the same files."""
        self._run("pg_ctl", "stop", "-m", "fast", "-w", "-D", str(self.data_dir))

    def resume(self) -> None:
        options = " ".join(f"-c {name}='{value}'" for name, value in _SETTINGS.items())
        self._run("pg_ctl", "start", "-w", "-t", str(_START_TIMEOUT_S),
                  "-D", str(self.data_dir), "-l", str(self.log_file),
                  "-o", f"{options} -k '{self.socket_dir}' -p {PORT}")

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        if (self.data_dir / "postmaster.pid").exists():
            with contextlib.suppress(PgUnavailable):
                self._run("pg_ctl", "stop", "-m", "immediate", "-w", "-D", str(self.data_dir))
        shutil.rmtree(self.root, ignore_errors=True)

    # -- helpers ---------------------------------------------------------------------------

    def _run(self, tool: str, *args: str) -> None:
        command = [str(self.bindir / tool), *args]
        if self.run_as is not None:
            command = ["runuser", "-u", self.run_as, "--", *command]
        try:
            subprocess.run(command, check=True, capture_output=True, text=True,
                           timeout=_START_TIMEOUT_S + 10, cwd=self.root)
        except subprocess.CalledProcessError as exc:
            output = (exc.stderr or exc.stdout or "").strip()
            raise PgUnavailable(f"{tool} failed ({exc.returncode}): {output[-800:]}") from None
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise PgUnavailable(f"{tool} failed: {exc}") from None

    def _log_tail(self) -> str:
        try:
            lines = self.log_file.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\nserver log:\n" + "\n".join(lines[-15:]) if lines else ""

    def _admin(self, sql: str) -> None:
        """One statement on the maintenance database, outside any transaction."""
        async def execute() -> None:
            import asyncpg  # type: ignore[import-untyped]

            conn: Any = await asyncpg.connect(
                host=str(self.socket_dir), port=PORT, user=ROLE, database="postgres")
            try:
                await conn.execute(sql)
            finally:
                await conn.close()

        run_in_own_loop(execute())


def run_in_own_loop(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` to completion in a thread with an event loop of its own.

    For sync fixtures: they may be set up while a test's event loop is already running (a
    getfixturevalue from an async fixture), where asyncio.run would refuse.
    """
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()
