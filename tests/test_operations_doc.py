"""docs/operations.md, run as written: its shell blocks, as root, in one bash session on a fresh
Debian root (tests/debian_root.py), in the order an operator follows them.

Each ```sh block is tagged by the HTML comment before it (`<!-- ops-test: STEP -->`) with the
step it belongs to; STEPS is the operator's order (the guide's, except that the upgrade comes
back to Install for the new release, and the backups run before what they protect). Between
steps the test looks from outside, as Slack and Prometheus would: the replicas' ports on this
host's loopback, requests signed with the old and the new signing secret.

What is replaced in the guide's text, and only that: the database server's address (the
throwaway server's socket), the four ports (free ones, chosen by the OS), AI Reserve's URL (the
simulator) and the two placeholders a stand-in checks (the bot token, the AI Reserve key). The
session's environment adds where Slack is (a stand-in), pip's wheelhouse (the lockfiles' wheels,
offline) and no listener drain (each restart would wait 5 s for nothing).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import re
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import aiohttp
import pytest

from bot.config.settings import Settings
from storage.migrations import head_revision
from tests import debian_root, image
from tests.conftest import in_ci
from tests.pg import PgServer
from tests.procs import world
from tests.releases import next_release, pyproject_version
from tests.test_image import unused_port

REPO = Path(__file__).resolve().parent.parent
GUIDE = REPO / "docs" / "operations.md"
_BLOCK = re.compile(r"(?:<!-- ops-test: (?P<tag>[\w-]+) -->\n)?```sh\n(?P<body>.*?)```", re.S)
STEPS = ("install", "first-install", "configure", "first-start", "run", "check", "sqlite-backup",
         "upgrade", "rollback", "sqlite-restore", "postgres", "replicas", "postgres-backup",
         "postgres-restore", "rotate-signing", "rotate-signing-done")
PORTS = ("3000", "3001", "3010", "3011")  # replica a's PORT and INTERNAL_PORT, then b's
_PORT = re.compile(r"\b(?:%s)\b" % "|".join(PORTS))  # noqa: UP031
GUIDE_DB = "@db.internal:5432/clusterbot?"
SOCKET = "/run/postgresql"
OLD_SECRET, NEW_SECRET = "your-signing-secret", "your-new-signing-secret"
CHECKOUTS = ("pyproject.toml", "setup.py", "README.md", "requirements")


def blocks(tag: str | None = None) -> list[str]:
    found = [(m["tag"], m["body"]) for m in _BLOCK.finditer(GUIDE.read_text())]
    return [body for t, body in found if tag is None or t == tag]


def test_every_shell_block_is_tagged_with_a_step_the_run_takes():
    tags = [m["tag"] for m in _BLOCK.finditer(GUIDE.read_text())]
    assert tags and None not in tags, "put <!-- ops-test: STEP --> right above each ```sh block"
    assert set(tags) == set(STEPS), set(tags) ^ set(STEPS)
    assert not re.search(r"```(?:bash|shell|console)\n", GUIDE.read_text()), "use ```sh blocks"


def test_the_guide_names_every_setting():
    text = GUIDE.read_text()
    missing = [name.upper() for name in Settings.model_fields if f"`{name.upper()}" not in text]
    assert missing == []


def test_the_guides_database_password_is_on_no_command_line():
    """The password sits in a pass file the URL names: not in the URL, which `pg_dump`,
    `pg_restore` and `export` lines put where `ps` and the shell's history show them."""
    text = "\n".join(blocks("postgres"))
    assert "passfile=/etc/cluster-bot/pgpass" in text
    urls = re.findall(r"postgres(?:ql)?://[^'\"\s]*", text)
    assert urls and not [url for url in urls if re.match(r"postgres(?:ql)?://[^/@]*:[^/@]*@", url)]


def test_no_secret_goes_to_a_tmpfs():
    # /run is a tmpfs on systemd hosts: secrets put there are gone at the next boot.
    assert "/run/secrets" not in "\n".join(blocks())


class Shell:
    """One root bash session in the Debian root, fed a step at a time on its stdin."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.transcript: list[str] = []
        self.timings: list[str] = []

    async def run(self, script: str, *, cwd: str | None = None, within: float = 600) -> str:
        marker = f"@@step-done-{uuid.uuid4().hex}"
        chunk = (f"cd {cwd}\n" if cwd else "") + "{\n" + script + "\n} </dev/null\n" \
            + f"echo {marker}\n"
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(chunk.encode())
        await self.proc.stdin.drain()
        out: list[str] = []
        deadline = time.monotonic() + within
        while True:
            line = await asyncio.wait_for(self.proc.stdout.readline(),
                                          max(deadline - time.monotonic(), 0.1))
            if not line:
                code = await self.proc.wait()
                raise AssertionError(f"the session ended (exit {code}) in:\n{script}\n--- "
                                     f"output\n{''.join(out)}\n--- before\n"
                                     f"{''.join(self.transcript)[-3000:]}")
            text = line.decode(errors="replace")
            if text.strip() == marker:
                self.transcript += out
                return "".join(out)
            out.append(text)

    async def step(self, tag: str, replace: dict[str, str], *, cwd: str | None = None) -> str:
        script = "\n".join(blocks(tag))
        for guide, here in replace.items():
            script = script.replace(guide, here)
        script = _PORT.sub(lambda m: replace[m[0]], script)
        began = time.monotonic()
        out = await self.run(script, cwd=cwd)
        self.timings.append(f"{tag} {time.monotonic() - began:.1f} s")
        return out


def checkouts(tmp_path: Path) -> tuple[Path, Path]:
    """This tree's release, and the next one (one more migration, compatible; its own
    version), as checkouts: what `pyproject.toml`, `setup.py`, `README.md`, the lockfiles,
    `bot/` and `storage/` make."""
    this = tmp_path / "this"
    for package in ("bot", "storage"):
        shutil.copytree(REPO / package, this / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    upcoming = next_release(tmp_path)
    for root in (this, upcoming):
        for name in CHECKOUTS:
            copy = shutil.copytree if (REPO / name).is_dir() else shutil.copy
            copy(REPO / name, root / name)
    pyproject = upcoming / "pyproject.toml"
    pyproject.write_text(pyproject.read_text().replace(
        f'version = "{pyproject_version()}"', f'version = "{pyproject_version()}+next"', 1))
    return this, upcoming


def signed(secret: str, body: str) -> dict[str, str]:
    stamp = str(int(time.time()))
    digest = hmac.new(secret.encode(), f"v0:{stamp}:{body}".encode(), hashlib.sha256)
    return {"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": f"v0={digest.hexdigest()}",
            "Content-Type": "application/json"}


async def accepts(port: str, secret: str) -> bool:
    """Whether the replica on `port` takes a request signed with `secret` (Slack's URL check)."""
    body = json.dumps({"type": "url_verification", "challenge": "c-1", "token": "t"})
    async with aiohttp.ClientSession() as session, session.post(
            f"http://127.0.0.1:{port}/slack/events", data=body,
            headers=signed(secret, body)) as response:
        text = await response.text()
        assert response.status in (200, 401), (response.status, text)
        return response.status == 200 and "c-1" in text


def revision(pg_server: PgServer) -> str:
    done = subprocess.run(["psql", "-h", str(pg_server.socket_dir), "-U", "postgres", "-d",
                           "clusterbot", "-tAc", "SELECT version_num FROM alembic_version"],
                          capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.strip()


def lease_holders(metrics: str) -> float:
    return sum(float(line.split()[-1]) for line in metrics.splitlines()
               if line.startswith("clusterbot_sweeps_lease_holder"))


@pytest.mark.image
@pytest.mark.postgres
async def test_the_guide_runs_as_written_on_a_fresh_debian_host(tmp_path, pg_server):
    reason = image.unavailable()
    if reason:
        if in_ci():
            pytest.fail(f"the guide's run must happen in CI (CI=true): {reason}", pytrace=False)
        pytest.skip(f"can't make a Debian root here: {reason}")
    started = time.monotonic()
    this, upcoming = checkouts(tmp_path)
    version = pyproject_version()
    wheels = debian_root.wheelhouse()
    host = debian_root.Host()
    pg_server._admin('DROP DATABASE IF EXISTS clusterbot WITH (FORCE)')
    pg_server._admin('DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '
                     "'cluster-bot') THEN CREATE ROLE \"cluster-bot\" LOGIN; END IF; END $$")
    pg_server._admin('CREATE DATABASE clusterbot OWNER "cluster-bot"')
    shell = None
    try:
        async with world(tmp_path) as w:
            ports = {guide: str(unused_port()) for guide in PORTS}
            replace = ports | {
                GUIDE_DB: f"@/clusterbot?host={SOCKET}&",
                "https://api.aireserve.example/v1": w.sim.base_url,
                "xoxb-your-bot-token": w.slack.bot_token,
                "your-aireserve-key": w.sim.api_key}
            env = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": "/srv/wheels",
                   "SLACK_API_URL": w.slack.api_url, "LISTENER_DRAIN_SECONDS": "0"}
            volumes = [f"{this}:/srv/this", f"{upcoming}:/srv/next", f"{wheels}:/srv/wheels:ro",
                       f"{pg_server.socket_dir}/.s.PGSQL.5432:{SOCKET}/.s.PGSQL.5432"]
            proc = await asyncio.create_subprocess_exec(
                *host.argv("exec bash -s", env=env, volumes=volumes,
                           cwd="/srv/this"),
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT)
            shell = Shell(proc)
            await shell.run("set -euo pipefail")

            out = await shell.step("install", replace, cwd="/srv/this")
            assert out.endswith(f"cluster-bot {version} (commit unknown)\n"), out
            out = await shell.step("first-install", replace)
            assert out.endswith(f"cluster-bot {version} (commit unknown)\n"), out  # on PATH
            await shell.step("configure", replace)
            # The secrets: the bot's user's alone, on disk.
            modes = await shell.run("stat -c '%U %a %n' /etc/cluster-bot/secrets "
                                    "/etc/cluster-bot/secrets/*")
            assert {" ".join(line.split()[:2]) for line in modes.splitlines()} \
                == {"cluster-bot 700", "cluster-bot 600"}, modes
            out = await shell.step("first-start", replace)
            assert "can run: yes" in out, out
            out = await shell.step("run", replace)
            out = await shell.step("check", replace)
            assert 'clusterbot_sweeps_lease_holder 1.0' in out, out
            assert f'version="{version}"' in out, out
            out = await shell.step("sqlite-backup", replace)
            assert out.splitlines()[-1:] == ["ok"] or "ok\n" in out, out  # integrity_check

            # The next release: installed beside this one, asked, switched to, and back.
            out = await shell.step("install", replace, cwd="/srv/next")
            assert out.endswith(f"cluster-bot {version}+next (commit unknown)\n"), out
            out = await shell.step("upgrade", replace)
            assert "migrations pending" in out and out.endswith(
                f"cluster-bot {version}+next (commit unknown)\n"), out
            assert f'version="{version}+next"' in await shell.step("check", replace)
            out = await shell.step("rollback", replace)
            assert "can run: yes (without migrating)" in out, out
            assert out.endswith(f"cluster-bot {version} (commit unknown)\n"), out
            assert f'version="{version}"' in await shell.step("check", replace)
            out = await shell.step("sqlite-restore", replace)
            assert "can run: yes" in out, out

            # PostgreSQL: two replicas, one restarted; a backup and a restore.
            await shell.step("postgres", replace)
            assert revision(pg_server) == head_revision()  # the replicas are on PostgreSQL
            out = await shell.step("replicas", replace)
            assert lease_holders(out) == 1.0, out
            assert out.count(f'version="{version}"') == 2, out
            await shell.step("postgres-backup", replace)
            out = await shell.step("postgres-restore", replace)
            assert "can run: yes" in out, out

            # The signing secret: both accepted while rolling, the old one refused after.
            await shell.step("rotate-signing", replace)
            for port in (ports["3000"], ports["3010"]):
                assert await accepts(port, NEW_SECRET) and await accepts(port, OLD_SECRET)
            await shell.step("rotate-signing-done", replace)
            for port in (ports["3000"], ports["3010"]):
                assert await accepts(port, NEW_SECRET)
                assert not await accepts(port, OLD_SECRET)

            await shell.run("stop_replica a\nstop_replica b")
            logs = await shell.run("cat /var/log/cluster-bot/*.log")
            assert "Traceback" not in logs, logs[-4000:]
    finally:
        if shell is not None and shell.proc.returncode is None:
            assert shell.proc.stdin is not None
            shell.proc.stdin.close()
            with contextlib.suppress(ProcessLookupError):
                shell.proc.kill()
            await shell.proc.wait()
        _kill_replicas(host)
        print(_replica_logs(host))  # noqa: T201 (shown when the test fails)
        host.close()
        pg_server._admin('DROP DATABASE IF EXISTS clusterbot WITH (FORCE)')
        steps = ", ".join(shell.timings) if shell is not None else ""
        print(f"the guide's run: {time.monotonic() - started:.0f} s ({steps})")  # noqa: T201


def _replica_logs(host: debian_root.Host) -> str:
    done = subprocess.run(host.argv("tail -n 30 /var/log/cluster-bot/*.log", env={}, volumes=[],
                                    cwd="/"), capture_output=True, text=True, check=False,
                          timeout=60)
    return done.stdout + done.stderr


def _kill_replicas(host: debian_root.Host) -> None:
    """Replicas a failed run left behind (chroot isolation: their pids are this host's)."""
    subprocess.run(host.argv("cat /var/lib/cluster-bot/*.pid 2>/dev/null | xargs -r kill -KILL",
                             env={}, volumes=[], cwd="/"), capture_output=True, check=False,
                   timeout=60)
