"""`cluster-bot serve` as a real process: it refuses to fake clusters unless told to, starts with
AIRESERVE_SIMULATOR=embedded, logs JSON lines, serves /metrics, and reloads its policy on SIGHUP
(a bad file keeps the old policy, names each problem's line and tells the admins)."""

import asyncio
import json
import re
import signal
import sys

import aiohttp
import pytest

from devslack.webapi import FakeSlack
from tests.procs import REPO, base_env, wait_for

pytestmark = pytest.mark.procs  # real processes: one at a time (tests/conftest.py)

GOOD = """\
approvals_channel: C0APPROVALS
approvers:
  users: [U0BOB, U0CAROL]
admins: [U0CAROL]
approval:
  auto_approve_below: 10.00
  one_approver_up_to: 100.00
"""
BAD = GOOD.replace("  one_approver_up_to: 100.00\n", "  one_approver_up_to: 5.00\n") \
    + "limits:\n  max_nodez: 4\n"
WAIT = 60.0  # seconds a real process gets for each step (it takes about one; CI is shared)


def env_for(tmp_path, **extra):
    return base_env() | {
        "SLACK_BOT_TOKEN": "xoxb-devslack", "SLACK_SIGNING_SECRET": "s3cret",
        "APPROVALS_CHANNEL": "C0APPROVALS", "APPROVERS": "U0BOB,U0CAROL",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'bot.db'}", "PORT": "0",
        "INTERNAL_PORT": "0", **extra}


async def test_serve_without_a_provider_stops_with_one_line(tmp_path):
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "serve", cwd=tmp_path, env=env_for(tmp_path),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    _, err = await asyncio.wait_for(proc.communicate(), WAIT)
    assert proc.returncode == 2
    problems = [line for line in err.decode().splitlines() if "configuration:" in line]
    assert len(problems) == 1
    assert "AIRESERVE_API_URL" in problems[0] and "AIRESERVE_SIMULATOR=embedded" in problems[0]


class Lines:
    """The child's stderr, one JSON object per line, read as they come."""

    def __init__(self, stream: asyncio.StreamReader) -> None:
        self._stream = stream
        self.seen: list[dict] = []

    async def until(self, predicate) -> dict:
        async with asyncio.timeout(WAIT):
            for line in self.seen:
                if predicate(line):
                    return line
            while True:
                raw = await self._stream.readline()
                assert raw, "the bot exited:\n" + "\n".join(map(str, self.seen))
                line = json.loads(raw)  # every line is one JSON object
                self.seen.append(line)
                if predicate(line):
                    return line


def says(text):
    return lambda line: text in line["message"]


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="POSIX signals")
async def test_serve_embedded_metrics_json_logs_and_policy_reload(tmp_path):
    policy = tmp_path / "policy.yaml"
    policy.write_text(GOOD)
    async with FakeSlack() as slack:
        env = env_for(tmp_path, AIRESERVE_SIMULATOR="embedded", LOG_FORMAT="json",
                      SLACK_API_URL=slack.api_url, POLICY_FILE=str(policy))
        env["PYTHONPATH"] = str(REPO)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", "serve", cwd=tmp_path, env=env,
            stderr=asyncio.subprocess.PIPE)
        assert proc.stderr is not None
        lines = Lines(proc.stderr)
        try:
            start = await lines.until(says("starting:"))
            assert "embedded simulator" in start["message"]
            assert "Slack HTTP" in start["message"] and "database sqlite" in start["message"]
            assert str(policy) in start["message"]
            listening = await lines.until(says("listening for Slack on "))
            assert listening["message"].startswith("listening for Slack on 0.0.0.0:")
            public, internal = re.findall(r"this host: (http://[^/\s]+)/",
                                          listening["message"])
            async with aiohttp.ClientSession() as http:
                async with http.get(f"{internal}/metrics") as response:
                    assert response.status == 200
                    assert "clusterbot_burn_cents_per_hour 0.0" in await response.text()
                async with http.get(f"{public}/metrics") as response:
                    assert response.status == 404  # spend is not on the port Slack reaches

            policy.write_text(BAD)
            proc.send_signal(signal.SIGHUP)
            refused = [await lines.until(says(":7:")), await lines.until(says(":9:"))]
            assert all(r["level"] == "ERROR" and "old policy stays" in r["message"]
                       for r in refused)
            assert "max_nodez" in refused[1]["message"]
            await wait_for(lambda: slack.dms("U0CAROL"), within=WAIT, what="the DM to the admin")
            told = slack.dms("U0CAROL")[-1].text
            assert "not used" in told and ":9:" in told

            policy.write_text(GOOD.replace("10.00", "12.00"))
            proc.send_signal(signal.SIGHUP)
            await lines.until(says("policy reloaded from"))
            proc.send_signal(signal.SIGTERM)
            assert await asyncio.wait_for(proc.wait(), WAIT) == 0
            assert "xoxb-devslack" not in json.dumps(lines.seen)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()


async def test_make_run_without_slack_still_runs_the_local_workspace(tmp_path):
    """`run` without Slack credentials is the local workspace on the embedded simulator: the
    provider check is `serve`'s alone. Its terminal reads stdin; at its end it exits."""
    env = base_env() | {"DATABASE_URL": f"sqlite:///{tmp_path / 'bot.db'}"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "run", cwd=tmp_path, env=env,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), WAIT)
    assert proc.returncode == 0, err.decode()
    assert "the embedded simulator" in out.decode()
    assert "configuration:" not in err.decode()


@pytest.mark.parametrize("setting", ["PORT", "INTERNAL_PORT"])
async def test_a_port_in_use_is_one_line_and_exit_2(tmp_path, setting):
    import socket

    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", "serve", cwd=tmp_path,
            env=env_for(tmp_path, **{setting: str(port)}, AIRESERVE_SIMULATOR="embedded"),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        _, err = await asyncio.wait_for(proc.communicate(), WAIT)
    assert proc.returncode == 2
    text = err.decode()
    [line] = [line for line in text.splitlines() if "can't listen" in line]
    assert line.startswith(f"cluster-bot: {setting}: can't listen on 0.0.0.0:{port}: ")
    assert f"set {setting})" in line and "Traceback" not in text
