"""`cluster-bot simulator`: the AI Reserve simulator on its own, until Ctrl-C.

`add_arguments` fills the sub-command's parser; `run` serves. The CLI wiring lives in
bot/app/cli.py; this module only knows how to serve.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from bot.clock import Clock, ManualClock, SystemClock

if TYPE_CHECKING:  # the CLI builds its parser with this module: the simulator loads on `run`
    from aireserve_sim.embedded import EmbeddedSimulator

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8787


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The simulator's options, on the parser the CLI hands in."""
    parser.add_argument("--host", default=DEFAULT_HOST,
                        help="address to bind (default %(default)s)")
    parser.add_argument("--port", type=_port, default=DEFAULT_PORT,
                        help="port to bind, 0 for any free one (default %(default)s)")
    parser.add_argument("--virtual-clock", action="store_true",
                        help="freeze time; move it with POST /_sim/clock/advance {seconds}")
    parser.add_argument("--start-at", type=_start, default=None, metavar="ISO|now",
                        help="where the virtual clock starts: an ISO 8601 instant with a zone, "
                             "or 'now' (the default)")
    parser.add_argument("--profile", choices=("fast", "realistic"), default="realistic",
                        help="fast: second-long boots, no rate limits; realistic: minutes-long "
                             "boots, rate limits on (default %(default)s)")
    parser.add_argument("--api-key", default=None,
                        help="accept only this bearer token (default: any non-empty token)")


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"not a TCP port: {text!r} (0-65535)")
    return port


def _start(text: str) -> datetime:
    if text == "now":
        return SystemClock().now()
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        when = None
    if when is None or when.tzinfo is None:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 instant with a zone: {text!r}")
    return when


def build(args: argparse.Namespace) -> EmbeddedSimulator:
    """The simulator the arguments describe, not yet serving."""
    from aireserve_sim.config import SimConfig
    from aireserve_sim.embedded import EmbeddedSimulator

    config = SimConfig.fast() if args.profile == "fast" else SimConfig.realistic()
    # A virtual clock starts at the wall clock's time unless told otherwise, so clients'
    # Date-based offsets are sane.
    start = getattr(args, "start_at", None) or SystemClock().now()
    clock: Clock = ManualClock(start) if args.virtual_clock else SystemClock()
    # An empty --api-key would lock everyone out (empty tokens are refused): treat it as unset.
    api_key = args.api_key or None
    return EmbeddedSimulator(config, clock, api_key=api_key, host=args.host, port=args.port)


def banner(sim: EmbeddedSimulator, args: argparse.Namespace) -> str:
    """The one line saying where the simulator listens and how to authenticate."""
    auth = "the key given with --api-key" if args.api_key else "any non-empty key"
    clock = "virtual clock" if args.virtual_clock else "real clock"
    return (
        f"AI Reserve simulator ({args.profile} profile, {clock}) listening on {sim.base_url} — "
        f"send 'Authorization: Bearer <key>' with {auth}; controls at {sim.admin_url} "
        f"with 'X-Sim-Admin: 1'. Ctrl-C to stop."
    )


async def serve(
    args: argparse.Namespace, *, stop: asyncio.Event, announce: Callable[[str], None]
) -> None:
    """Serve until `stop` is set (or the task is cancelled, which is what Ctrl-C does)."""
    async with build(args) as sim:
        announce(banner(sim, args))
        await stop.wait()


def run(args: argparse.Namespace) -> int:
    """Serve until Ctrl-C (or SIGTERM). Returns the process exit code."""

    def announce(line: str) -> None:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    async def main() -> None:
        stop = asyncio.Event()
        # Ctrl-C (SIGINT) and a service manager's SIGTERM end it alike, whatever it inherited:
        # started in the background by a script (`… &`, nohup), it starts with SIGINT ignored,
        # Python keeps ignoring it and asyncio.run's own Ctrl-C handling stays off (issue 32).
        # Where the loop cannot (Windows), Ctrl-C is asyncio.run's KeyboardInterrupt, below.
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):
                asyncio.get_running_loop().add_signal_handler(sig, stop.set)
        await serve(args, stop=stop, announce=announce)

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        return 0
    except OSError as exc:  # the port is taken, or the host is not ours
        sys.stderr.write(f"simulator: cannot listen on {args.host}:{args.port}: {exc}\n")
        return 1
    return 0
