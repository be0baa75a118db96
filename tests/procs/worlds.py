"""A world for real-process tests: FakeSlack in here, the simulator and the bots as children, one
database, and one clock that moves them all (`world()`; tests/procs/__init__.py says how)."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from bot.domain.models import LaunchRequest, RequestStatus
from bot.slack.ids import Action
from devslack.models import DEFAULT_USERS, Message, SlackUser
from devslack.webapi import FakeSlack
from storage.db import Database
from tests.e2e.harness import (
    ALICE,
    APPROVALS,
    BOB,
    CAROL,
    DAVE,
    GENERAL,
    LEADS,
    SECRET,
    launch_without_ssh,
)
from tests.procs.bots import BotProcess
from tests.procs.child import base_env, wait_for
from tests.procs.note import what_happened
from tests.procs.simulator import SimProcess


@dataclass
class World:
    """The simulator, FakeSlack, a database and the bots started in it."""

    directory: Path
    database_url: str
    sim: SimProcess
    slack: FakeSlack
    bots: list[BotProcess] = field(default_factory=list)
    advanced: float = 0.0

    @property
    def clock_file(self) -> Path:
        return self.directory / "clock-offset"

    async def bot(self, name: str | None = None, *, env: Mapping[str, str | None] | None = None,
                  policy: str | None = None, wait: bool = True) -> BotProcess:
        """Start a bot (one more replica if others run); returns once it serves (`wait`)."""
        name = name or f"bot{len(self.bots) + 1}"
        full = base_env() | {
            "SLACK_BOT_TOKEN": self.slack.bot_token,
            "SLACK_SIGNING_SECRET": SECRET,
            "SLACK_API_URL": self.slack.api_url,
            "DATABASE_URL": self.database_url,
            "AIRESERVE_API_URL": self.sim.base_url,
            "AIRESERVE_API_KEY": self.sim.api_key,
            "APPROVALS_CHANNEL": APPROVALS,
            "APPROVERS": f"{BOB},{CAROL}",
            "POLL_INTERVAL_SECONDS": "1",
            "PORT": "0",
            "INTERNAL_PORT": "0",
            "LOG_LEVEL": os.environ.get("PROCS_LOG_LEVEL", "INFO"),  # DEBUG: each AI Reserve call
            "CLOCK_OFFSET_FILE": str(self.clock_file),
            "LISTENER_DRAIN_SECONDS": "0",  # a test that drains says how long
        }
        if policy is not None:
            path = self.directory / f"{name}-policy.yaml"
            path.write_text(policy)
            full["POLICY_FILE"] = str(path)
        for key, value in (env or {}).items():
            if value is None:
                full.pop(key, None)
            else:
                full[key] = value
        bot = BotProcess(name=name, env=full, directory=self.directory, slack=self.slack)
        self.bots.append(bot)
        await bot.start(wait=wait)
        return bot

    async def advance(self, seconds: float) -> None:
        """Time passes: on the simulator's virtual clock and on every bot's clock."""
        await self.sim.advance(seconds)
        self.advanced += seconds
        tmp = self.clock_file.with_suffix(".tmp")
        tmp.write_text(repr(self.advanced))
        tmp.replace(self.clock_file)  # atomic: a bot never reads half a number

    def text_of(self, message: Message) -> str:
        return message.text + json.dumps(message.blocks)

    async def request_launch(self, bot: BotProcess, *, text: str = "quote h100x8 nodes=2",
                             user: str = ALICE) -> Message:
        """Quote, press Request launch and submit the modal as `user`; returns the approval
        card (posted in APPROVALS). Click it with `bot.requests.click(card, Action.APPROVE,
        user_id=BOB)`."""
        cards = len(self.slack.messages(APPROVALS))
        await bot.requests.slash(text=text, user_id=user, channel_id=GENERAL)
        quote = await wait_for(lambda: [m for m in self.slack.ephemerals(user)
                                        if Action.QUOTE_REQUEST_LAUNCH in self.text_of(m)],
                               what="the quote")
        await bot.requests.click(quote[-1], Action.QUOTE_REQUEST_LAUNCH, user_id=user)
        modal = await wait_for(lambda: self.slack.last_view(user), what="the request modal")
        reply = await bot.requests.submit_view(modal, user_id=user, values=launch_without_ssh())
        assert reply.status == 200 and not reply.body, reply.body
        found = await wait_for(lambda: self.slack.messages(APPROVALS)[cards:],
                               what="the approval card")
        return found[-1]

    @asynccontextmanager
    async def database(self) -> AsyncIterator[Database]:
        """The bots' database, to read (a bot migrates it when it starts)."""
        db = Database(self.database_url)
        try:
            yield db
        finally:
            await db.dispose()

    async def requests(self) -> list[LaunchRequest]:
        """Every launch request in the bots' database, whatever its status."""
        async with self.database() as db, db.transaction() as repos:
            return await repos.requests.list_by_status(list(RequestStatus))


@asynccontextmanager
async def world(tmp_path: Path, *, database_url: str | None = None,
                profile: str = "fast", slack_limits: str = "") -> AsyncIterator[World]:
    """`slack_limits`: Slack's rate limits FakeSlack enforces (devslack/limits.py)."""
    async with AsyncExitStack() as stack:
        users = (*DEFAULT_USERS, SlackUser(DAVE, "dave", "Dave Diaz"))
        slack = await stack.enter_async_context(FakeSlack(
            channels={GENERAL: "general", APPROVALS: "approvals", "C0RANDOM": "random"},
            users=users, usergroups={LEADS: [CAROL]}, rate_limits=slack_limits))
        sim = SimProcess(tmp_path, profile=profile)
        stack.push_async_callback(sim.stop)
        await sim.start()
        w = World(directory=tmp_path, sim=sim, slack=slack,
                  database_url=database_url or f"sqlite:///{tmp_path / 'bot.db'}")

        async def close_bots() -> None:
            for bot in w.bots:
                with contextlib.suppress(AssertionError):
                    await bot.close()

        stack.push_async_callback(close_bots)
        try:
            yield w
        except Exception as failed:
            failed.add_note(what_happened(w))  # the report shows the processes' side too
            raise
        assert slack.violations == [], slack.violations
