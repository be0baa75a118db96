"""EmbeddedSimulator's lifecycle and the standalone runner (`cluster-bot simulator`)."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from aireserve_sim.config import SimConfig
from aireserve_sim.embedded import EmbeddedSimulator
from aireserve_sim.standalone import add_arguments, build, run, serve
from bot.clock import ManualClock, SystemClock

ROOT = Path(__file__).resolve().parents[3]


def _parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return parser.parse_args(list(argv))


async def test_embedded_serves_on_an_os_chosen_loopback_port(http_session) -> None:
    clock = ManualClock()
    sim = EmbeddedSimulator(SimConfig.fast(), clock)
    assert sim.engine.clock is clock and sim.clock is clock
    with pytest.raises(RuntimeError):
        _ = sim.base_url
    async with sim:
        assert sim.base_url == f"http://127.0.0.1:{sim.port}/v1" and sim.port > 0
        assert sim.admin_url == f"http://127.0.0.1:{sim.port}/_sim"
        async with http_session.get(f"{sim.base_url}/health") as resp:
            assert resp.status == 200
        url = sim.base_url
    with pytest.raises(RuntimeError):
        _ = sim.base_url
    with pytest.raises(aiohttp.ClientConnectionError):
        async with http_session.get(f"{url}/health"):
            pass


async def test_two_simulators_side_by_side() -> None:
    async with EmbeddedSimulator() as one, EmbeddedSimulator() as two:
        assert one.port != two.port
        assert isinstance(one.clock, SystemClock)


def test_arguments_and_defaults() -> None:
    args = _parse()
    assert (args.host, args.port, args.virtual_clock, args.profile, args.api_key) == (
        "127.0.0.1", 8787, False, "realistic", None)
    args = _parse("--port", "0", "--virtual-clock", "--profile", "fast", "--api-key", "k")
    sim = build(args)
    assert isinstance(sim.clock, ManualClock) and sim.config == SimConfig.fast()
    assert sim.api_key == "k"
    assert build(_parse()).config == SimConfig.realistic()
    assert build(_parse("--api-key", "")).api_key is None
    for bad in (["--profile", "slow"], ["--port", "65536"], ["--port", "-1"], ["--port", "x"]):
        with pytest.raises(SystemExit):
            _parse(*bad)


async def test_serve_announces_and_stops(http_session) -> None:
    lines: list[str] = []
    stop = asyncio.Event()
    announced = asyncio.Event()

    def announce(line: str) -> None:
        lines.append(line)
        announced.set()

    args = _parse("--port", "0", "--virtual-clock", "--profile", "fast", "--api-key", "k")
    task = asyncio.create_task(serve(args, stop=stop, announce=announce))
    await asyncio.wait_for(announced.wait(), 5)
    url = lines[0].split(" listening on ")[1].split(" ")[0]
    assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
    assert "Bearer" in lines[0] and "--api-key" in lines[0] and "X-Sim-Admin" in lines[0]
    async with http_session.get(f"{url}/account", headers={"Authorization": "Bearer k"}) as r:
        assert r.status == 200
    stop.set()
    await asyncio.wait_for(task, 5)


def _signal_sets(pid: int) -> str:
    """The process's blocked, ignored and caught signal sets (Linux), for a failure's message."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return "signal sets unknown"
    return ", ".join(line.replace("\t", " ") for line in lines if line.startswith("Sig"))


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize(("sig", "ignored"), [
    (signal.SIGINT, False),
    # Started in the background by a script (`make test &`, nohup: how CI ran the suite) a
    # process starts with SIGINT ignored, and so does every child it starts (issue 32).
    (signal.SIGINT, True),
    (signal.SIGTERM, False),
], ids=["SIGINT", "SIGINT-inherited-ignored", "SIGTERM"])
def test_run_until_ctrl_c_or_sigterm(sig: signal.Signals, ignored: bool) -> None:
    code = (
        "import argparse, sys\n"
        "from aireserve_sim.standalone import add_arguments, run\n"
        "p = argparse.ArgumentParser(); add_arguments(p)\n"
        "sys.exit(run(p.parse_args(['--port', '0', '--virtual-clock'])))\n"
    )
    # The default disposition, or SIGINT ignored across exec as a shell's background job has it.
    start = ["sh", "-c", 'trap "" INT; exec "$0" "$@"'] if ignored else []
    proc = subprocess.Popen(
        [*start, sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert " listening on http://127.0.0.1:" in line and "any non-empty key" in line
        sets = _signal_sets(proc.pid)
        proc.send_signal(sig)
        try:
            rc = proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running 10 s after {sig.name}: the simulator's {sets}; this "
                        f"process's SIGINT handler: {signal.getsignal(signal.SIGINT)!r}")
        assert rc == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def test_run_reports_a_busy_port(capsys) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert run(_parse("--port", str(port), "--profile", "fast")) == 1
    assert f"cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err
