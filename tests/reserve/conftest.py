"""Fixtures for the AI Reserve client tests.

- `fake_api`: a tiny scripted aiohttp server on 127.0.0.1, port 0, that records every request;
  the client unit tests point the real client at it.
- `sleeps`: a fake `sleep` that records delays (and moves `clock`) instead of waiting.
- `sim` / `sim_client` / `admin`: the EmbeddedSimulator over real HTTP for the contract suite
  (imported lazily, so the unit tests run even while the simulator is being written).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from aiohttp import web
from multidict import CIMultiDict

from bot.clock import ManualClock
from bot.reserve.client import AsyncAIReserveClient

API_KEY = "sk-test-SECRET-0123456789"
START = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Seen:
    """One request as the fake server received it."""

    method: str
    path: str
    raw_path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: Any


@dataclass
class FakeApi:
    """Scripted answers per (METHOD, path); the last answer of a script repeats."""

    base_url: str = ""
    seen: list[Seen] = field(default_factory=list)
    scripts: dict[tuple[str, str], list[Handler]] = field(default_factory=dict)

    def on(self, method: str, path: str, *answers: Handler) -> None:
        self.scripts[(method, "/v1" + path)] = list(answers)

    def reply(self, method: str, path: str, *answers: tuple[Any, ...]) -> None:
        """Answer with (status, json-or-text body[, headers]) in turn."""
        self.on(method, path, *(respond(*a) for a in answers))

    def requests(self, method: str | None = None, path: str | None = None) -> list[Seen]:
        return [s for s in self.seen
                if (method is None or s.method == method)
                and (path is None or s.path == "/v1" + path)]

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode()
        self.seen.append(Seen(request.method, request.path, request.raw_path, dict(request.query),
                              dict(request.headers), body))
        script = self.scripts.get((request.method, request.path))
        if not script:
            return web.json_response(
                {"error": {"code": "not_found", "message": "no script", "status": 404,
                           "requestId": "req_fake"}}, status=404)
        handler = script.pop(0) if len(script) > 1 else script[0]
        return await handler(request)


def respond(status: int, body: Any = None, headers: dict[str, str] | None = None) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        hdrs = {"X-Request-Id": "req_fake1", **(headers or {})}
        if isinstance(body, str):
            return web.Response(status=status, text=body, headers=hdrs, content_type="text/html")
        return web.json_response(body, status=status, headers=hdrs)

    return handler


def error_body(code: str, status: int, details: dict[str, Any] | None = None,
               request_id: str = "req_err1", message: str = "nope") -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "status": status,
                      "requestId": request_id, "details": details or {},
                      "retryAfterSeconds": None}}


# --- sample wire bodies (contract §2 examples) ---------------------------------------------

SHAPE = {"accelerator": "h100-sxm-80gb", "gpusPerNode": 8, "nodes": 2}
RATE = {"hourlyCents": 6253, "perGpuHourlyCents": 390, "currency": "USD",
        "billingIncrement": "hour"}


def quote_json(quote_id: str = "qte_1") -> dict[str, Any]:
    return {
        "id": quote_id, "shape": SHAPE, "totalGpus": 16, "orchestrator": "none",
        "location": "us-tx", "rootDiskGb": 100, "storage": {"sizeGb": 1000}, "volumeId": None,
        "rate": RATE,
        "breakdown": {
            "gpus": {"count": 16, "perGpuHourlyCents": 390, "hourlyCents": 6240},
            "rootDisks": {"count": 2, "sizeGbEach": 100, "centsPerGbMonth": 10, "hourlyCents": 3},
            "sharedVolume": {"sizeGb": 1000, "centsPerGbMonth": 7, "hourlyCents": 10},
            "interconnect": {"hourlyCents": 0, "included": True},
        },
        "availability": "high", "createdAt": "2026-11-29T10:00:00Z",
        "expiresAt": "2026-11-29T10:15:00Z", "launchedClusterId": None,
    }


def cluster_json(cluster_id: str = "clu_1", status: str = "provisioning") -> dict[str, Any]:
    return {
        "id": cluster_id, "name": "dsv3", "quoteId": "qte_1", "status": status, "shape": SHAPE,
        "totalGpus": 16, "orchestrator": "none", "location": "us-tx",
        "createdAt": "2026-11-29T10:00:00Z", "readyAt": None, "terminatedAt": None,
        "terminationReason": None, "lastError": None, "lockedRate": RATE, "nodes": [],
        "connections": None,
        # Always present (contract §2.4): a cluster without it is unreadable, not free.
        "billing": {"accruedHours": 0, "accruedCents": 0, "unpaidCents": 0,
                    "paymentStatus": "current", "nextAccrualAt": None, "graceEndsAt": None},
    }


def volume_json(volume_id: str = "vol_1") -> dict[str, Any]:
    return {
        "id": volume_id, "name": "weights", "sizeGb": 1000, "location": "us-tx",
        "status": "available", "attachedClusterId": None, "mountPath": "/workspace",
        "createdWithClusterId": None,
        "billing": {"centsPerGbMonth": 7, "hourlyCents": 10, "coveredByCluster": False},
        "createdAt": "2026-11-29T10:00:00Z", "deletedAt": None,
    }


# --- fixtures -------------------------------------------------------------------------------


@pytest_asyncio.fixture
async def fake_api() -> AsyncIterator[FakeApi]:
    api = FakeApi()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", api.dispatch)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    api.base_url = f"http://{host}:{port}/v1"
    try:
        yield api
    finally:
        await runner.cleanup()


@pytest_asyncio.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as s:
        yield s


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


class Sleeps:
    """A fake `sleep`: records each delay and moves the manual clock by it, never waits."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        self.clock.advance(seconds)


@pytest.fixture
def sleeps(clock: ManualClock) -> Sleeps:
    return Sleeps(clock)


@pytest.fixture
def make_client(
    fake_api: FakeApi, session: aiohttp.ClientSession, clock: ManualClock, sleeps: Sleeps
) -> Callable[..., AsyncAIReserveClient]:
    def make(**kw: Any) -> AsyncAIReserveClient:
        kw.setdefault("clock", clock)
        kw.setdefault("sleep", sleeps)
        kw.setdefault("random", lambda: 1.0)  # the jitter ceiling: deterministic delays
        return AsyncAIReserveClient(session, fake_api.base_url, API_KEY, **kw)

    return make


# --- the simulator, for the contract suite ---------------------------------------------------


class Admin:
    """The simulator's /_sim control surface (X-Sim-Admin: 1), used only by tests."""

    def __init__(self, session: aiohttp.ClientSession, admin_url: str) -> None:
        self._session = session
        self._url = admin_url.rstrip("/")

    async def _post(self, path: str, body: dict[str, Any]) -> Any:
        async with self._session.post(self._url + path, json=body,
                                      headers={"X-Sim-Admin": "1"}) as resp:
            data = await resp.json()
            assert 200 <= resp.status < 300, (path, resp.status, data)
            return data

    async def advance(self, seconds: float) -> Any:
        return await self._post("/clock/advance", {"seconds": seconds})

    async def fail_node(self, cluster_id: str, rank: int, mode: str = "stopped") -> Any:
        return await self._post(f"/clusters/{cluster_id}/nodes/{rank}/fail", {"mode": mode})

    async def set_recoverable(self, cluster_id: str, rank: int, value: bool) -> Any:
        return await self._post(f"/clusters/{cluster_id}/nodes/{rank}/recoverable",
                                {"value": value})

    async def capacity(self, accelerator: str, location: str, **kw: Any) -> Any:
        return await self._post("/capacity",
                                {"accelerator": accelerator, "location": location, **kw})

    async def balance(self, cents: int) -> Any:
        return await self._post("/account", {"balanceCents": cents})

    async def fault(self, route: str, **kw: Any) -> Any:
        return await self._post("/faults", {"route": route, **kw})

    async def ledger(self) -> list[dict[str, Any]]:
        async with self._session.get(self._url + "/ledger",
                                     headers={"X-Sim-Admin": "1"}) as resp:
            assert resp.status == 200
            data: dict[str, list[dict[str, Any]]] = await resp.json()
        return data["data"]


@pytest_asyncio.fixture
async def sim() -> AsyncIterator[Any]:
    from aireserve_sim.config import SimConfig
    from aireserve_sim.embedded import EmbeddedSimulator

    async with EmbeddedSimulator(SimConfig.fast(), ManualClock(START)) as simulator:
        yield simulator


@pytest.fixture
def admin(sim: Any, session: aiohttp.ClientSession) -> Admin:
    return Admin(session, sim.admin_url)


@pytest.fixture
def sim_client(sim: Any, session: aiohttp.ClientSession) -> AsyncAIReserveClient:
    async def no_wait(seconds: float) -> None:  # retries against the simulator never wait
        return None

    return AsyncAIReserveClient(session, sim.base_url, API_KEY, clock=sim.clock, sleep=no_wait,
                                random=lambda: 0.0, timeout=5.0)


# --- contract-suite helpers ------------------------------------------------------------------

H100 = "h100-sxm-80gb"
PROVISION_SECONDS = 5  # SimConfig.fast(): one node boots every 5 s, so N nodes are ready at 5N


async def launch(client: AsyncAIReserveClient, *, nodes: int = 2, gpus: int = 8,
                 accelerator: str = H100, location: str = "us-tx", key: str | None = None,
                 storage_gb: int | None = None, volume_id: str | None = None,
                 **launch_kw: Any) -> tuple[Any, Any]:
    """Quote and launch (still provisioning): returns (quote, cluster)."""
    quote = await client.quote_cluster(accelerator, gpus, nodes, location=location,
                                       storage_gb=storage_gb, volume_id=volume_id)
    cluster = await client.launch_cluster(quote.id, idempotency_key=key or f"launch-{quote.id}",
                                          **launch_kw)
    return quote, cluster


async def launch_running(client: AsyncAIReserveClient, admin: Admin, **kw: Any
                         ) -> tuple[Any, Any]:
    """Quote, launch and advance the virtual clock until every node runs."""
    quote, cluster = await launch(client, **kw)
    await admin.advance(PROVISION_SECONDS * quote.shape.nodes)
    cluster = await client.get_cluster(cluster.id)
    assert cluster.status == "running", cluster.status
    return quote, cluster


async def advance_until(client: AsyncAIReserveClient, admin: Admin, cluster_id: str,
                        *statuses: str, step: float = 1.0, limit: int = 600) -> Any:
    """Step the virtual clock until the cluster reaches one of `statuses` (bounded)."""
    for _ in range(limit):
        cluster = await client.get_cluster(cluster_id)
        if cluster.status in statuses:
            return cluster
        await admin.advance(step)
    raise AssertionError(f"{cluster_id} never reached {statuses}")


async def raw(session: aiohttp.ClientSession, base_url: str, method: str, path: str,
              body: Any = None, *, auth: bool = True) -> tuple[int, CIMultiDict[str], Any]:
    """A request the typed client cannot (or must not) make: unknown fields, /stop, no auth."""
    headers = {"Authorization": f"Bearer {API_KEY}"} if auth else {}
    async with session.request(method, base_url + path, json=body, headers=headers) as resp:
        data = await resp.json(content_type=None)
        return resp.status, CIMultiDict(resp.headers), data
