"""`make run` without Slack credentials: the bot, the embedded simulator and a Slack workspace in
this terminal, talking over loopback exactly as they would in production.

The local workspace (bot/devslack) plays Slack: it signs every command and click the way Slack
does and serves the Web API the bot calls. People: alice (requester), bob and carol (approvers);
channels #general and #approvals.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import sys

from pydantic import SecretStr

from bot import runtime
from bot.config import Settings
from bot.devslack.webapi import FakeSlack
from bot.devslack.workspace import LocalWorkspace

APPROVALS = "C0APPROVALS"
CHANNELS = {"C0GENERAL": "general", APPROVALS: "approvals"}
APPROVERS = ("bob", "carol")
LOCAL_POLL_SECONDS = 5  # the fast simulator boots a node in 5 s: show progress as it happens


async def _run(settings: Settings) -> None:
    async with FakeSlack(channels=CHANNELS) as slack:
        secret = secrets.token_hex(16)
        local = settings.model_copy(update={
            "slack_bot_token": SecretStr(slack.bot_token),
            "slack_signing_secret": SecretStr(secret),
            "slack_api_url": slack.api_url,
            "approvals_channel": APPROVALS,
            "approvers": tuple(slack.user(name).id for name in APPROVERS),
            "poll_interval_seconds": LOCAL_POLL_SECONDS,
        })
        async with runtime.start(local) as rt, \
                runtime.http_site(rt, host="127.0.0.1", port=0) as url:
            from bot.devslack.terminal import run_repl

            async with LocalWorkspace(slack=slack, events_url=f"{url}/slack/events",
                                      signing_secret=secret, approvers=APPROVERS) as workspace:
                await run_repl(workspace, input=sys.stdin, output=sys.stdout)


def run_local(settings: Settings) -> int:
    # The terminal is the workspace: keep the bot's own logging to warnings on stderr.
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    print("No SLACK_BOT_TOKEN: starting a local Slack workspace in this terminal "  # noqa: T201
          "(AI Reserve: " + ("the embedded simulator" if settings.uses_simulator
                             else settings.aireserve_api_url or "?") + ").")
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_run(settings))
    return 0
