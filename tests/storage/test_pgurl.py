"""PostgreSQL URLs as libpq writes them (`sslmode`, `sslrootcert`, `target_session_attrs` …):
one URL serves the bot, `migrate` and `pg_dump`; a parameter or value the bot can't honour is
refused by name, one line and exit 2, before anything connects. Over real TLS: a self-signed CA
and a TLS front for the throwaway server (tests/pgtls.py). Before: `TypeError: connect() got an
unexpected keyword argument 'sslmode'`, exit 1."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from storage import pgurl
from storage.db import Database
from tests.pg import PORT, PgServer
from tests.pgtls import make_certificates, tls_front

REPO = Path(__file__).resolve().parent.parent.parent


def test_libpq_parameters_reach_asyncpg_as_a_url_not_as_keywords():
    url = ("postgres://u:p%40ss@db.example:5433/bot?sslmode=verify-full&sslrootcert=/dev/null"
           "&target_session_attrs=read-write&connect_timeout=7&application_name=bot")
    pgurl.check(url)
    bare, options = pgurl.engine_args(url)
    assert bare == "postgresql+asyncpg://"  # nothing SQLAlchemy would turn into keywords
    assert set(options) == {"async_creator"}
    # The form taken before (`ssl=`, asyncpg's) still works: it means sslmode.
    pgurl.check("postgresql://u@db/bot?ssl=require")


@pytest.mark.parametrize(("query", "named"), [
    ("keepalives=1", "'keepalives' is libpq's, but this bot's driver (asyncpg) can't honour it"),
    ("sslmode=verify_full", "sslmode='verify_full' is not one of disable, allow, prefer"),
    ("target_session_attrs=primary-ish", "target_session_attrs='primary-ish' is not one of"),
    ("sslrootcert=/nonexistent/ca.pem", "sslrootcert='/nonexistent/ca.pem': no file"),
    ("port=fivefour", "port='fivefour' is not a number"),
])
def test_what_it_cant_honour_is_named_and_the_password_never_is(query, named):
    with pytest.raises(ValueError) as caught:
        pgurl.check(f"postgresql://bot:hunter2@db/bot?sslmode=require&{query}")
    assert named in str(caught.value) and "hunter2" not in str(caught.value)


async def _run(*argv: str, env: dict[str, str], cwd: Path) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        *argv, env=env, cwd=cwd, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT)
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode()


def _env(**more: str) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("PG", "DATABASE_URL"))}
    return keep | {"PYTHONPATH": str(REPO)} | more


async def test_migrate_refuses_a_parameter_in_one_line_with_exit_2(tmp_path):
    url = "postgresql://bot:hunter2@127.0.0.1:1/bot?sslmode=require&keepalives_idle=30"
    code, out = await _run(sys.executable, "-m", "bot", "migrate", cwd=tmp_path,
                           env=_env(DATABASE_URL=url))
    assert code == 2 and "Traceback" not in out and "hunter2" not in out, out
    lines = out.strip().splitlines()
    assert lines[0].startswith("cluster-bot: configuration: DATABASE_URL: ") and \
        "'keepalives_idle'" in lines[0], out


@pytest.mark.postgres
async def test_one_tls_url_serves_migrate_the_bot_and_pg_dump(tmp_path, pg_server: PgServer,
                                                              pg_url):
    if shutil.which("pg_dump") is None:
        pytest.skip("no pg_dump here")
    name = urlsplit(pg_url).path.lstrip("/")
    certs = make_certificates(tmp_path / "tls")
    async with tls_front(pg_server.socket_dir / f".s.PGSQL.{PORT}", certs) as front:
        url = (f"postgresql://postgres@127.0.0.1:{front.port}/{name}?sslmode=verify-full"
               f"&sslrootcert={certs.ca}&target_session_attrs=read-write"
               "&application_name=cluster-bot&connect_timeout=10")
        code, out = await _run(sys.executable, "-m", "bot", "migrate", cwd=tmp_path,
                               env=_env(DATABASE_URL=url))
        assert (code, out) == (0, "")
        db = Database(url)
        try:
            assert await db.at_head()
        finally:
            await db.dispose()
        dump = tmp_path / "bot.dump"
        code, out = await _run("pg_dump", "--format=custom", f"--file={dump}", url,
                               cwd=tmp_path, env=_env())
        assert code == 0 and dump.stat().st_size > 0, out
        assert front.sessions and set(front.sessions) == {"tls"}, front.sessions

        # Honoured, not ignored: a certificate another CA signed is refused …
        other = Database(url.replace(str(certs.ca), str(certs.other_ca)))
        try:
            with pytest.raises(Exception, match="(?i)certificate"):
                await other.at_head()
        finally:
            await other.dispose()
        # … and so is TLS itself when the URL says not to use it.
        plain = Database(url.replace("sslmode=verify-full", "sslmode=disable"))
        try:
            with pytest.raises(Exception):  # noqa: B017 (the front hangs up: any error)
                await plain.at_head()
        finally:
            await plain.dispose()
        assert front.sessions[-1] == "plain"
