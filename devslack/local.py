"""`make run` without Slack credentials: the bot, the embedded simulator and a Slack workspace in
this terminal, talking over loopback exactly as they would in production.

The local workspace (devslack) plays Slack: it signs every command and click the way Slack
does and serves the Web API the bot calls. People: alice (requester), bob and carol (approvers);
channels #general and #approvals.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import sys
from typing import TextIO

from pydantic import SecretStr

from bot.app import runtime
from bot.app.process import Runtime
from bot.clock import OffsetClock
from bot.config.settings import Settings
from bot.domain.errors import DomainError
from bot.domain.policy import Policy
from bot.jobs import sweeps
from bot.reserve import errors as api
from bot.services.provider_errors import is_provider_trouble
from devslack.terminal import Terminal
from devslack.webapi import FakeSlack
from devslack.workspace import LocalWorkspace

APPROVALS = "C0APPROVALS"
CHANNELS = {"C0GENERAL": "general", APPROVALS: "approvals"}
APPROVERS = ("bob", "carol")
# Without POLICY_FILE the demo shows the spend policy at work: small clusters are
# auto-approved, mid-size ones need one approver, large ones two (see policy.example.yaml).
DEMO_POLICY = {"auto_approve_below_cents": 1000, "one_approver_up_to_cents": 10000,
               "admin_ids": frozenset({"U0CAROL"}), "default_user_budget_cents": 4_000_000,
               "max_lifetime_hours": 72}
LOCAL_POLL_SECONDS = 5  # the fast simulator boots a node in 5 s: show progress as it happens


SIM_HELP = """\
  sim advance N[s|m|h]        move AI Reserve's clock and the bot's forward a poll interval at
                              a time, every sweep run at each step (as real time would)
  sim fail [CLUSTER] [RANK]   AI Reserve loses a node (the newest cluster, rank 1 by default)
  sim unrecoverable [CLUSTER] [RANK]   that node can't be brought back by recovery
  sim log [CLUSTER] [node=RANK] LINE   the workload on that node (rank 0 by default) prints
                              LINE, e.g. `sim log Application startup complete`, then poll"""

_UNITS = {"s": 1, "m": 60, "h": 3600}


class ClusterTerminal(Terminal):
    """The generic local workspace plus `sim …` lines that steer the embedded simulator."""

    def __init__(self, workspace: LocalWorkspace, *, rt: Runtime, clock: OffsetClock,
                 input: TextIO, output: TextIO) -> None:
        super().__init__(workspace, input=input, output=output)
        self._rt = rt
        self._clock = clock

    async def settle(self) -> None:
        # FakeSlack's quiet spell alone can end while the bot is still working on a busy machine
        # (a quote's answer later than the quiet spell): also wait for the bot's own listeners.
        await self.ws.settle()
        await self._rt.settle()
        await self.ws.settle()

    async def handle(self, line: str) -> bool:
        if line == "help":
            await super().handle(line)
            self.screen.say(SIM_HELP)
            return True
        if line.split()[:1] != ["sim"]:
            return await super().handle(line)
        try:
            self.screen.say(await self._sim(line.split()[1:]))
        except (ValueError, LookupError, DomainError, api.ApiError) as exc:
            self.screen.say(f"sim: {exc}")
        return True

    async def _sim(self, words: list[str]) -> str:
        simulator = self._rt.simulator
        if simulator is None:
            return "sim: only with the embedded simulator (AIRESERVE_API_URL is set)"
        verb, args = (words[0], words[1:]) if words else ("", [])
        if verb == "advance" and len(args) == 1 and args[0][:-1].isdigit() \
                and args[0][-1] in _UNITS:
            await self._advance(int(args[0][:-1]) * _UNITS[args[0][-1]])
            return f"AI Reserve's clock is now {self._clock.now():%Y-%m-%d %H:%M:%S} UTC"
        if verb == "log" and args:
            return await self._log(args)
        if verb in ("fail", "unrecoverable") and len(args) <= 2:
            if args and args[0].startswith("clu_"):
                cluster_id, args = args[0], args[1:]
            else:  # the newest live cluster: ids are hard to type
                live = simulator.engine.list_clusters()
                if not live:
                    return "sim: no cluster yet"
                cluster_id = live[0].id
            rank = int(args[0]) if args else 1
            if verb == "fail":
                simulator.engine.fail_node(cluster_id, rank, "unhealthy")
                await sweeps.watch_and_tell(self._rt.services)
                return f"node {rank} of {cluster_id} is down"
            simulator.engine.set_recoverable(cluster_id, rank, False)
            return f"node {rank} of {cluster_id} can't be recovered now"
        return "sim: " + SIM_HELP.strip()

    async def _advance(self, seconds: int) -> None:
        """Move AI Reserve's clock and the bot's as a real clock would: in steps no longer than
        the poll interval, each step's sweeps run to the end before the next. One jump would let
        AI Reserve charge hours the bot never had the chance to prevent (an envelope's
        terminate is due a poll interval before the charge), which a real clock never does."""
        services = self._rt.services
        step = self._rt.settings.poll_interval_seconds
        if seconds > step:  # an hour is hundreds of sweeps: say why it takes a while
            self.screen.say(f"  (moving the clocks in {-(-seconds // step)} steps of {step} s, "
                            "each poll's sweeps run as in real time…)")
        left = seconds
        while left > 0:
            moved = min(step, left)
            self._clock.advance(moved)
            left -= moved
            for sweep in (sweeps.watch_and_tell, sweeps.enforce_envelopes,
                          sweeps.deliver_outbox, sweeps.finish_terminations,
                          sweeps.resume_launches, sweeps.remind_volumes):
                try:
                    await sweep(services)
                except Exception as exc:  # as the scheduler does: the next step tries again
                    if not is_provider_trouble(exc):
                        raise
                    self.screen.say(f"sim: {sweep.__name__}: AI Reserve: {exc}")

    async def _log(self, args: list[str]) -> str:
        """`sim log [CLUSTER] [node=RANK] LINE`: what the workload prints (readiness demo)."""
        simulator = self._rt.simulator
        assert simulator is not None
        cluster_id = args.pop(0) if args[0].startswith("clu_") else None
        rank = 0
        if args and args[0].startswith("node=") and args[0][5:].isdigit():
            rank = int(args.pop(0)[5:])
        if not args:
            return "sim: say what the node prints, e.g. `sim log Application startup complete`"
        if cluster_id is None:  # the newest live cluster: ids are hard to type
            live = simulator.engine.list_clusters()
            if not live:
                return "sim: no cluster yet"
            cluster_id = live[0].id
        line = " ".join(args)
        simulator.engine.append_log(cluster_id, rank, line)
        await sweeps.watch_and_tell(self._rt.services)
        return f"node {rank} of {cluster_id} printed: {line}"


async def session(settings: Settings, *, input: TextIO, output: TextIO) -> None:
    """One local workspace session: the bot, the embedded simulator and the terminal reading
    `input` until it ends (`quit` or end of input). `make run` gives it the real terminal; the
    README's walkthroughs are replayed through it (tests/devslack/test_readme_sessions.py)."""
    async with FakeSlack(channels=CHANNELS) as slack:
        secret = secrets.token_hex(16)
        local = settings.model_copy(update={
            "slack_bot_token": SecretStr(slack.bot_token),
            "slack_signing_secret": SecretStr(secret),
            "slack_api_url": slack.api_url,
            "approvals_channel": APPROVALS,
            "approvers": tuple(slack.user(name).id for name in APPROVERS),
            "poll_interval_seconds": LOCAL_POLL_SECONDS,
            "slack_rate_limits": "off",  # the local Slack has no limits: each answer at once
        })
        clock = OffsetClock()
        policy = None
        if settings.policy_file is None:
            policy = Policy.simple(approvers=local.approvers, approvals_channel=APPROVALS)
            policy = policy.model_copy(update=DEMO_POLICY)
        async with runtime.start(local, clock=clock, policy=policy) as rt, \
                runtime.http_site(rt, host="127.0.0.1", port=0) as url, \
                LocalWorkspace(slack=slack, events_url=f"{url}/slack/events",
                               signing_secret=secret, approvers=APPROVERS) as workspace:
            await ClusterTerminal(workspace, rt=rt, clock=clock, input=input,
                                  output=output).run()


def run_local(settings: Settings) -> int:
    # The terminal is the workspace: keep the bot's own logging to warnings on stderr.
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    print("No SLACK_BOT_TOKEN: starting a local Slack workspace in this terminal "  # noqa: T201
          "(AI Reserve: " + ("the embedded simulator" if settings.uses_simulator
                             else settings.aireserve_api_url or "?") + ").")
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(session(settings, input=sys.stdin, output=sys.stdout))
    return 0
