"""`make run` without Slack credentials: the bot, the embedded simulator and a Slack workspace in
this terminal and in a browser page, talking over loopback exactly as they would in production.

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
from collections.abc import Callable
from typing import TextIO

from pydantic import SecretStr

from bot.app import runtime
from bot.app.process import Runtime
from bot.clock import OffsetClock
from bot.config.settings import Settings
from bot.domain.policy import Policy
from devslack.browser import BrowserWorkspace
from devslack.logs import FoldedLog
from devslack.simulation import CONTROLS, MovableClock, Simulation
from devslack.simulation import HELP as SIM_HELP
from devslack.terminal import HELP, Terminal
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


class ClusterTerminal(Terminal):
    """The generic local workspace plus `sim …` lines that steer the embedded simulator."""

    def __init__(self, workspace: LocalWorkspace, *, rt: Runtime, clock: MovableClock,
                 input: TextIO, output: TextIO, log: FoldedLog | None = None) -> None:
        super().__init__(workspace, input=input, output=output)
        self._rt = rt
        self.sim = Simulation(rt, clock, say=self.screen.say)
        self._log = log

    async def settle(self) -> None:
        # FakeSlack's quiet spell alone can end while the bot is still working on a busy machine
        # (a quote's answer later than the quiet spell): also wait for the bot's own listeners.
        await self.ws.settle()
        await self._rt.settle()
        await self.ws.settle()

    async def handle(self, line: str) -> bool:
        try:
            if line == "help":
                await super().handle(line)
                self.screen.say(SIM_HELP)
                return True
            if line.split()[:1] != ["sim"]:
                return await super().handle(line)
            self.screen.say(await self.sim.run(line))
            return True
        finally:
            if self._log is not None:  # the bot's repeated warnings, summed up once per line
                self._log.flush_repeats()


async def session(settings: Settings, *, input: TextIO, output: TextIO,
                  log: FoldedLog | None = None,
                  on_browser: Callable[[BrowserWorkspace], None] | None = None) -> None:
    """One local workspace session: the bot, the embedded simulator, the workspace in a browser
    page (its URL printed first) and the terminal reading `input` until it ends (`quit` or end
    of input). `make run` gives it the real terminal; the README's walkthroughs are replayed
    through it (tests/devslack/test_readme_sessions.py); `on_browser` hands the page's server
    to a test."""
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
            terminal = ClusterTerminal(workspace, rt=rt, clock=clock, input=input,
                                       output=output, log=log)
            sim = terminal.sim
            async with BrowserWorkspace(
                    workspace, lines={"sim": sim.run}, controls=CONTROLS,
                    status=lambda: f"AI Reserve's clock: {sim.now():%Y-%m-%d %H:%M:%S} UTC",
                    help_text=f"{HELP}\n{SIM_HELP}") as browser:
                terminal.screen.say(f"The same workspace in a browser: {browser.url}")
                if on_browser is not None:
                    on_browser(browser)
                await terminal.run()


def run_local(settings: Settings) -> int:
    # The terminal is the workspace: the bot's own logging is warnings on stderr, a warning
    # that repeats (a poll failing every 5 s through an outage) written once per typed line.
    log = FoldedLog(sys.stderr)
    root = logging.getLogger()
    root.addHandler(log)
    root.setLevel(logging.WARNING)
    print("No SLACK_BOT_TOKEN: starting a local Slack workspace in this terminal "  # noqa: T201
          "(AI Reserve: " + ("the embedded simulator" if settings.uses_simulator
                             else settings.aireserve_api_url or "?") + ").")
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(session(settings, input=sys.stdin, output=sys.stdout, log=log))
    finally:
        root.removeHandler(log)
    return 0
