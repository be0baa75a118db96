"""docs/operations.md: every shell block in it is run, in order, and must succeed.

Each ```sh block is tagged by the HTML comment before it with where it runs:
- `install`: a copy of the checkout (pyproject, README, bot/, storage/), pip from this machine's
  configured index: the guide's install, and the installed `cluster-bot --version`;
- `sqlite`: one bash session for all of them (exports carry over), `cluster-bot` being this
  tree's (`python -m bot`), the guide's paths under a scratch directory;
- `postgres`: the same on the throwaway PostgreSQL (tests/pg.py), its URL for the guide's;
- `serve`: a bot serving on the embedded simulator (`AIRESERVE_SIMULATOR=embedded`), ready,
  its internal address (health and metrics) for `localhost:3001`.
An untagged block, or a tag no test runs, fails here; so does a setting the guide doesn't name.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from bot.config.settings import Settings
from tests.releases import pyproject_version

REPO = Path(__file__).resolve().parent.parent
GUIDE = REPO / "docs" / "operations.md"
_BLOCK = re.compile(r"(?:<!-- ops-test: (?P<tag>[\w-]+) -->\n)?```sh\n(?P<body>.*?)```", re.S)
# The guide's URL up to its parameters (which name files under /run/secrets: replaced after).
GUIDE_PG_URL = "postgresql://cluster-bot@db.internal:5432/clusterbot?"
GUIDE_BOT_URL = "http://localhost:3001"  # the internal port: health and metrics
TAGS = {"install", "sqlite", "postgres", "serve"}
_LISTENING = re.compile(r"this host: (http://\S+)/readyz")


def blocks(tag: str | None = None) -> list[str]:
    found = [(m["tag"], m["body"]) for m in _BLOCK.finditer(GUIDE.read_text())]
    return [body for t, body in found if tag is None or t == tag]


def _paths(root: Path) -> dict[str, str]:
    return {f"/{name}": str(root / name) for name in (
        "opt/cluster-bot", "etc/cluster-bot", "run/secrets", "var/lib/cluster-bot",
        "var/backups/cluster-bot")}


def _script(tag: str, replace: dict[str, str]) -> str:
    text = "\n".join(blocks(tag))
    for guide, here in replace.items():
        text = text.replace(guide, here)
    return "set -euo pipefail\n" + text


def _shims(root: Path) -> Path:
    """`cluster-bot` and `python3` as this tree's: the interpreter running the tests."""
    bin_dir = root / "bin"
    bin_dir.mkdir()
    for name, line in (("cluster-bot", f'exec "{sys.executable}" -m bot "$@"'),
                       ("python3", f'exec "{sys.executable}" "$@"')):
        shim = bin_dir / name
        shim.write_text(f"#!/bin/sh\n{line}\n")
        shim.chmod(0o755)
    return bin_dir


def _env(root: Path, *, tree: bool = True, **extra: str) -> dict[str, str]:
    keep = ("HOME", "LANG", "LC_ALL", "TMPDIR", "PIP_FIND_LINKS", "PIP_CERT",
            "PIP_DEFAULT_TIMEOUT", "PIP_DISABLE_PIP_VERSION_CHECK")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env["PATH"] = f"{root / 'bin'}:/usr/local/bin:/usr/bin:/bin"
    if tree:
        env["PYTHONPATH"] = str(REPO)
    return env | extra


def _run(script: str, *, cwd: Path, env: dict[str, str], timeout: float = 120) -> str:
    done = subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, (f"exit {done.returncode}\n--- script\n{script}\n--- stdout\n"
                                  f"{done.stdout}\n--- stderr\n{done.stderr}")
    return done.stdout


def _scratch(tmp_path: Path) -> dict[str, str]:
    replace = _paths(tmp_path)
    for path in replace.values():
        Path(path).mkdir(parents=True, exist_ok=True)
    _shims(tmp_path)
    return replace


def test_every_shell_block_is_tagged_with_where_a_test_runs_it():
    tags = [m["tag"] for m in _BLOCK.finditer(GUIDE.read_text())]
    assert tags and None not in tags, "put <!-- ops-test: TAG --> right above each ```sh block"
    assert set(tags) <= TAGS, set(tags) - TAGS
    assert not re.search(r"```(?:bash|shell|console)\n", GUIDE.read_text()), "use ```sh blocks"


def test_the_guide_names_every_setting():
    text = GUIDE.read_text()
    missing = [name.upper() for name in Settings.model_fields if f"`{name.upper()}" not in text]
    assert missing == []


def test_the_sqlite_commands_run(tmp_path):
    replace = _scratch(tmp_path)
    out = _run(_script("sqlite", replace), cwd=tmp_path, env=_env(tmp_path))
    assert "can run: yes" in out and "nothing to migrate: roll the replicas" in out, out
    assert "ok" in out.splitlines()  # PRAGMA integrity_check
    assert (tmp_path / "var/backups/cluster-bot/cluster-bot-py.db").stat().st_size > 0


@pytest.mark.postgres
def test_the_postgres_commands_run(tmp_path, pg_url):
    replace = {GUIDE_PG_URL: f"{pg_url}&"} | _scratch(tmp_path)
    if shutil.which("pg_dump") is None or shutil.which("pg_restore") is None:
        pytest.skip("pg_dump/pg_restore are not installed (the PostgreSQL client tools)")
    out = _run(_script("postgres", replace), cwd=tmp_path, env=_env(tmp_path))
    assert out.strip().endswith("can run: yes"), out
    assert (tmp_path / "run/secrets/pgpass").stat().st_mode & 0o077 == 0


def test_the_guides_database_password_is_on_no_command_line():
    """The password sits in a pass file the URL names: not in the URL, which `pg_dump`,
    `pg_restore` and `export` lines put where `ps` and the shell's history show them."""
    text = "\n".join(blocks("postgres"))
    assert "passfile=/run/secrets/pgpass" in text
    urls = re.findall(r"postgres(?:ql)?://[^'\"\s]*", text)
    assert urls and not [url for url in urls if re.match(r"postgres(?:ql)?://[^/@]*:[^/@]*@", url)]


def test_the_running_bot_commands_run(tmp_path):
    replace = _scratch(tmp_path)
    log = (tmp_path / "bot.log").open("w")
    bot = subprocess.Popen(
        [sys.executable, "-m", "bot", "serve"], cwd=tmp_path, stdout=log,
        stderr=subprocess.STDOUT, env=_env(
            tmp_path, SLACK_BOT_TOKEN="xoxb-test", SLACK_SIGNING_SECRET="s",
            SLACK_API_URL="http://127.0.0.1:9/api/", AIRESERVE_SIMULATOR="embedded",
            APPROVALS_CHANNEL="C0APPROVALS", APPROVERS="U0BOB", POLL_INTERVAL_SECONDS="1",
            PORT="0", INTERNAL_PORT="0", DATABASE_URL=f"sqlite:///{tmp_path / 'bot.db'}"))
    try:
        url = _until(lambda: _match(tmp_path / "bot.log"), what="the bot serving")
        _until(lambda: _status(f"{url}/readyz") == 200, what="the bot ready")
        out = _run(_script("serve", replace | {GUIDE_BOT_URL: url}), cwd=tmp_path,
                   env=_env(tmp_path))
        assert "clusterbot_sweeps_lease_holder 1.0" in out, out
    finally:
        bot.terminate()
        bot.wait(30)
        log.close()


@pytest.mark.slow
def test_the_install_commands_run(tmp_path):
    """pip installs from the index this machine is configured with (CI's too)."""
    replace = _scratch(tmp_path)
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(REPO / name, checkout / name)
    for package in ("bot", "storage"):
        shutil.copytree(REPO / package, checkout / package,
                        ignore=shutil.ignore_patterns("__pycache__"))
    out = _run(_script("install", replace), cwd=checkout, env=_env(tmp_path, tree=False),
               timeout=600)
    # A copy outside git: the release, and a commit it can't know.
    assert out.splitlines(keepends=True)[-1] == f"cluster-bot {pyproject_version()} (commit " \
        "unknown)\n", out


def _until(check, *, what: str, within: float = 60.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)  # polling a child process's output, not letting time pass
    raise AssertionError(f"timed out waiting for {what}")


def _match(log: Path) -> str | None:
    found = _LISTENING.search(log.read_text(errors="replace"))
    return found[1] if found else None


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 (loopback)
            return int(response.status)
    except OSError as exc:
        return int(getattr(exc, "code", 0) or 0)
