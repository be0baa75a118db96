"""A whole bot on loopback: FakeSlack ⇄ signed HTTP ⇄ Bolt ⇄ services ⇄ simulator, one clock.

Tests speak Slack's protocol (`SlackRequests` signs every request exactly as Slack does) and read
what the bot did from FakeSlack's recorded workspace. Time moves only through `advance()`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp

from aireserve_sim.config import SimConfig
from aireserve_sim.embedded import EmbeddedSimulator
from bot.app import runtime
from bot.app.listeners import internal_site
from bot.clock import ManualClock
from bot.config.settings import load_settings
from bot.domain.models import ClusterRecord, LaunchRequest, RequestStatus
from bot.slack import ids
from bot.slack.blocks.launch_modal import FIELD_NO_SSH_OK, NO_SSH_OK
from bot.slack.blocks.story import FIELD_REASON
from bot.slack.ids import Action
from devslack.models import DEFAULT_USERS, Message, SlackUser
from devslack.requests import Reply, SlackRequests
from devslack.socketrequests import SocketRequests
from devslack.webapi import FakeSlack
from tests.loopwatch import starting_up
from tests.schema import migrated_sqlite

ALICE, BOB, CAROL, DAVE = "U0ALICE", "U0BOB", "U0CAROL", "U0DAVE"  # bob, carol approve
LEADS = "S0LEADS"  # a Slack user group (carol)
GENERAL, APPROVALS = "C0GENERAL", "C0APPROVALS"
SECRET = "test-signing-secret"
START = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)


@dataclass
class Harness:
    rt: runtime.Runtime
    slack: FakeSlack
    requests: SlackRequests
    clock: ManualClock
    sim: EmbeddedSimulator
    slept: list[float] = field(default_factory=list)

    async def sim_admin(self, path: str, body: dict[str, Any], *, method: str = "POST") -> Any:
        """The simulator's /_sim control endpoints (fail a node, faults, capacity …)."""
        async with aiohttp.ClientSession() as session, session.request(
                method, f"{self.sim.admin_url}/{path}", json=body,
                headers={"X-Sim-Admin": "1"}) as response:
            assert response.status < 300, await response.text()
            return await response.json()

    async def record(self, cluster_id: str) -> ClusterRecord:
        async with self.rt.db.transaction() as repos:
            found = await repos.clusters.get(cluster_id)
        assert found is not None
        return found

    async def running_cluster(self, text: str = "quote h100x8 nodes=2") -> str:
        """Quote, request, approve and boot a cluster; returns its id."""
        card = await self.request(quote_text=text)
        await self.click(card, Action.APPROVE, user=BOB)
        cluster_id = (await self.requests_in_db())[-1].cluster_id
        assert cluster_id is not None
        await self.advance(60)
        assert (await self.record(cluster_id)).status.value == "running"
        return cluster_id

    async def first_reminder(self, cluster_id: str) -> Message:
        """An hour after the cluster was ready: the owner's first hourly reminder (a DM)."""
        ready = self.sim.engine.get_cluster(cluster_id).ready_at
        assert ready is not None
        self.clock.set(ready + timedelta(hours=1))
        await self.rt.services.watching.sync_live()
        await self.rt.settle()
        [reminder] = [m for m in self.slack.dms(ALICE)
                      if Action.KEEP_RUNNING in self.text_of(m)]
        return reminder

    async def reject_with_reason(self, card: Message, reason: str, *,
                                 user: str = BOB) -> dict[str, Any]:
        """Reject with reason… on `card`, typing `reason` in its form; returns the form."""
        await self.click(card, Action.REJECT_WITH_REASON, user=user)
        form = self.slack.last_view(user)
        assert form is not None
        await self.submit(form, user=user, values={FIELD_REASON: {FIELD_REASON: reason}})
        return form

    async def top(self, cluster_id: str) -> Message:
        """The cluster's top message: its request's progress message, or its adopted card."""
        record = await self.record(cluster_id)
        async with self.rt.db.transaction() as repos:
            ref = await repos.messages.get("progress", record.request_id
                                           or f"cluster:{cluster_id}")
        assert ref is not None
        return self.slack.message(ref.channel_id, ref.ts)

    async def notices(self, cluster_id: str, containing: str = "") -> list[Message]:
        """The replies in the cluster's thread (that contain `containing`)."""
        top = await self.top(cluster_id)
        return [m for m in self.slack.thread(top.channel, top.ts)[1:]
                if containing in self.text_of(m)]

    async def fail_node(self, cluster_id: str, rank: int = 1, mode: str = "unhealthy") -> None:
        await self.sim_admin(f"clusters/{cluster_id}/nodes/{rank}/fail", {"mode": mode})

    async def approved_while_launch_fails(self, status: int, count: int) -> LaunchRequest:
        """Request a launch and approve it while AI Reserve answers `status` to the next
        `count` launch calls; the request as stored right after the click."""
        card = await self.request()
        await self.sim_admin("faults", {"route": "POST /v1/clusters", "status": status,
                                        "count": count})
        await self.click(card, Action.APPROVE, user=BOB)
        [request] = await self.requests_in_db()
        return request

    async def adopted_cluster(self) -> str:
        """A cluster launched at AI Reserve outside the bot, adopted by a reconcile; its id."""
        quote = await self.rt.provider.quote_cluster("a100-sxm-80gb", 8, 2)
        cluster = await self.rt.provider.launch_cluster(quote.id, idempotency_key="outside")
        await self.rt.services.reconciling.reconcile()
        await self.rt.settle()
        return cluster.id

    async def fail_for_good(self, cluster_id: str, rank: int = 1) -> None:
        """Node `rank` fails and AI Reserve can't recover it; a sweep later the bot has seen it."""
        await self.sim_admin(f"clusters/{cluster_id}/nodes/{rank}/recoverable", {"value": False})
        await self.fail_node(cluster_id, rank)
        await self.advance(30)

    async def approved_without_room(self) -> None:
        """A 4-node request approved while AI Reserve can place only 2 nodes: the launch fails."""
        self.sim.engine.set_capacity(accelerator="h100-sxm-80gb", location="us-tx",
                                     placeable_nodes=2)
        card = await self.request()  # 4 nodes
        await self.click(card, Action.APPROVE, user=BOB)

    async def unpaid_running_cluster(self) -> tuple[str, datetime]:
        """A running cluster (one hour charged when it became ready) on an account whose balance
        is now zero; its id and when it became ready."""
        cluster_id = await self.running_cluster()
        ready = self.sim.engine.get_cluster(cluster_id).ready_at
        assert ready is not None
        await self.sim_admin("account", {"balanceCents": 0})
        return cluster_id, ready

    async def degraded_cluster(self, *, recoverable: bool = True) -> tuple[str, Message]:
        """A running cluster (automatic recovery off) whose node 1 failed a sweep ago; its id
        and its degraded notice."""
        cluster_id = await self.running_cluster()
        if recoverable:
            await self.fail_node(cluster_id)
            await self.advance(30)
        else:
            await self.fail_for_good(cluster_id)
        assert (await self.record(cluster_id)).status.value == "degraded"
        [notice] = await self.notices(cluster_id, "is degraded")
        return cluster_id, notice

    async def requests_in_db(self) -> list[LaunchRequest]:
        async with self.rt.db.transaction() as repos:
            return await repos.requests.list_by_status(list(RequestStatus))

    # --- acting as people ------------------------------------------------------------------

    async def slash(self, text: str, *, user: str = ALICE, channel: str = GENERAL) -> Reply:
        reply = await self.requests.slash(text=text, user_id=user, channel_id=channel)
        await self.rt.settle()
        return reply

    async def click(self, surface: Message | dict[str, Any], action_id: str, *, user: str,
                    value: str | None = None) -> Reply:
        reply = await self.requests.click(surface, action_id, user_id=user, value=value)
        await self.rt.settle()
        return reply

    async def submit(self, view: dict[str, Any], *, user: str = ALICE,
                     values: dict[str, dict[str, Any]] | None = None) -> Reply:
        if view.get("callback_id") == ids.View.LAUNCH_REQUEST:  # no key: say so explicitly
            values = {**launch_without_ssh(), **(values or {})}
        reply = await self.requests.submit_view(view, user_id=user, values=values)
        await self.rt.settle()
        return reply

    async def advance(self, seconds: float) -> None:
        """Move the shared clock, then let the watcher poll as the scheduler would."""
        self.clock.advance(seconds)
        await self.rt.services.watching.sync_live()
        await self.rt.settle()

    # --- reading the workspace -------------------------------------------------------------

    def last_ephemeral(self, user: str, *, containing: str = "") -> Message:
        """The newest ephemeral shown to `user` (whose text or blocks contain `containing`).

        The ack's text is applied when its HTTP answer arrives, which may be after the
        listener's follow-up already landed; so tests look for content, not position."""
        found = [m for m in self.slack.ephemerals(user) if containing in self.text_of(m)]
        assert found, f"no ephemeral for {user} containing {containing!r}"
        return found[-1]

    def cards(self) -> list[Message]:
        return self.slack.messages(APPROVALS)

    def progress(self, channel: str = GENERAL) -> list[Message]:
        return self.slack.messages(channel)

    def text_of(self, message: Message) -> str:
        return message.text + json.dumps(message.blocks)

    def channel_payloads(self) -> str:
        """Everything posted where more than one person can read it."""
        public = [m for m in self.slack.all_messages()
                  if m.ephemeral_to is None and not m.channel.startswith("D")]
        return "\n".join(self.text_of(m) for m in public)

    # --- the happy path up to a given point ------------------------------------------------

    async def quote(self, text: str = "quote h100x8 nodes=4", *, user: str = ALICE) -> Message:
        await self.slash(text, user=user)
        return self.last_ephemeral(user, containing=Action.QUOTE_REQUEST_LAUNCH)

    async def request(self, *, user: str = ALICE, quote_text: str = "quote h100x8 nodes=4",
                      values: dict[str, dict[str, Any]] | None = None) -> Message:
        """Quote, press Request launch, submit the modal; returns the approval card."""
        card = await self.quote(quote_text, user=user)
        await self.click(card, Action.QUOTE_REQUEST_LAUNCH, user=user)
        modal = self.slack.last_view(user)
        assert modal is not None
        reply = await self.submit(modal, user=user, values=values)
        assert reply.status == 200 and not reply.body, reply.body
        return self.cards()[-1]


def launch_without_ssh() -> dict[str, dict[str, Any]]:
    """The launch form's "nobody can log in" box, ticked (the tests' clusters need no SSH)."""
    return {FIELD_NO_SSH_OK: {FIELD_NO_SSH_OK: [NO_SSH_OK]}}


@asynccontextmanager
async def fake_slack(clock: ManualClock) -> AsyncIterator[FakeSlack]:
    """Slack on the test's clock: its rate-limit windows pass when the test's time does."""
    users = (*DEFAULT_USERS, SlackUser(DAVE, "dave", "Dave Diaz"))
    async with FakeSlack(channels={GENERAL: "general", APPROVALS: "approvals",
                                   "C0RANDOM": "random"}, clock=clock, users=users,
                         usergroups={LEADS: [CAROL]}) as slack:
        yield slack
        assert slack.violations == [], slack.violations



@asynccontextmanager
async def replicas(tmp_path: Path, count: int, *, database_url: str | None,
                   slack: FakeSlack | None = None,
                   socket_mode: bool = False,
                   env: dict[str, str | None] | None = None) -> AsyncIterator[list[Harness]]:
    """`count` bots on one database, one AI Reserve, one Slack and one clock: replicas. Each
    harness's `.slack`, `.sim` and `.clock` are the shared ones."""
    clock = slack.clock if slack is not None and isinstance(slack.clock, ManualClock) \
        else ManualClock(START)
    async with AsyncExitStack() as stack:
        sim = await stack.enter_async_context(EmbeddedSimulator(SimConfig.fast(), clock))
        if slack is None:
            slack = await stack.enter_async_context(fake_slack(clock))
        yield [await stack.enter_async_context(bot(
            tmp_path, slack=slack, sim=sim, clock=clock, database_url=database_url,
            socket_mode=socket_mode, env=env)) for _ in range(count)]


@asynccontextmanager
async def bot(tmp_path: Path, *, slack: FakeSlack | None = None,
              sim: EmbeddedSimulator | None = None, clock: ManualClock | None = None,
              sim_config: SimConfig | None = None,
              policy: str | None = None,
              database_url: str | None = None,
              socket_mode: bool = False,
              env: dict[str, str | None] | None = None) -> AsyncIterator[Harness]:
    """A running bot. Pass `slack`/`sim`/`clock` to keep them across a restart of the bot.

    With `socket_mode` the bot runs `runtime.serve` with an app token: it connects to FakeSlack
    over Socket Mode (no signing secret, no Request URL) and the test speaks to it in envelopes.

    The database is a SQLite file in `tmp_path` unless `database_url` names another (the
    `pg_url` fixture's PostgreSQL database); pass the same URL again to restart on it. `env`
    changes the settings (None: unset one)."""
    clock = clock or (sim.clock if isinstance(sim and sim.clock, ManualClock) else None) \
        or ManualClock(START)
    async with AsyncExitStack() as stack:
        if slack is None:
            slack = await stack.enter_async_context(fake_slack(clock))
        changes, env = env or {}, {
            "SLACK_BOT_TOKEN": slack.bot_token,
            **({"SLACK_APP_TOKEN": slack.app_token, "PORT": "0", "INTERNAL_PORT": "0"}
               if socket_mode
               else {"SLACK_SIGNING_SECRET": SECRET}),
            "SLACK_API_URL": slack.api_url,
            # A new file starts at the newest migration (tests/schema.py: a copy of one migrated
            # once); an existing one (a restart) is the bot's to migrate or not.
            "DATABASE_URL": database_url or migrated_sqlite(tmp_path / "bot.db"),
            "APPROVALS_CHANNEL": APPROVALS,
            "APPROVERS": f"{BOB},{CAROL}",
            # Pacing runs on real time; the in-process tests run on a ManualClock.
            "SLACK_RATE_LIMITS": "off",
        }
        env = {k: v for k, v in (env | changes).items() if v is not None}
        if policy is not None:  # a spend policy file (YAML)
            (tmp_path / "policy.yaml").write_text(policy)
            env["POLICY_FILE"] = str(tmp_path / "policy.yaml")
        if sim is not None:  # an AI Reserve that outlives this bot process
            env |= {"AIRESERVE_API_URL": sim.base_url, "AIRESERVE_API_KEY": "test-key"}
        slept: list[float] = []

        async def no_wait(seconds: float) -> None:
            # A retry's wait passes on the shared clock instead of the wall clock.
            slept.append(seconds)
            clock.advance(seconds)

        with starting_up():  # not yet serving: the slow-callback check waits (loopwatch.py)
            rt = await stack.enter_async_context(runtime.start(
                load_settings(env), clock=clock, scheduler=False, sleep=no_wait,
                sim_config=sim_config))
        requests: SlackRequests
        if socket_mode:
            requests = await stack.enter_async_context(SocketRequests(slack=slack))
            await _serve_over_socket_mode(stack, rt, slack)
        else:
            url = await stack.enter_async_context(runtime.http_site(rt, host="127.0.0.1",
                                                                    port=0))
            # /healthz, /readyz, /metrics: on their own port (`rt.internal_url`), as served.
            await stack.enter_async_context(internal_site(rt, host="127.0.0.1", port=0))
            requests = await stack.enter_async_context(SlackRequests(
                events_url=f"{url}/slack/events", signing_secret=SECRET, slack=slack))
        # Start serves after START_WAIT_SECONDS whether or not the launches an earlier run left
        # are resumed (a loaded host can take longer): a test begins once they are.
        await rt.settle()
        simulator = sim or rt.simulator
        assert simulator is not None
        yield Harness(rt=rt, slack=slack, requests=requests, clock=clock, sim=simulator,
                      slept=slept)
        await rt.settle()


async def _serve_over_socket_mode(stack: AsyncExitStack, rt: runtime.Runtime,
                                  slack: FakeSlack) -> None:
    """`runtime.serve` in the background until the harness closes; returns once connected."""
    stop = asyncio.Event()
    before = slack.socket.connections_opened  # other replicas' connections don't count
    serving = asyncio.create_task(runtime.serve(rt, stop=stop, host="127.0.0.1"))

    async def close() -> None:
        stop.set()
        await serving

    stack.push_async_callback(close)
    connected = asyncio.create_task(slack.socket.wait_connected(more_than=before))
    await asyncio.wait({connected, serving}, return_when=asyncio.FIRST_COMPLETED)
    if serving.done():
        connected.cancel()
        serving.result()  # raises what stopped it
        raise RuntimeError("serve returned before connecting")
    connected.result()
