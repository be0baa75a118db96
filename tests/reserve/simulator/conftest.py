"""Fixtures for the simulator SERVER tests: a real EmbeddedSimulator on 127.0.0.1 port 0 with a
virtual clock, and `Api`, a thin raw-HTTP helper (the typed client is tested elsewhere; these
tests look at status codes, headers and envelopes on the wire)."""

from __future__ import annotations

import json as jsonlib
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from multidict import CIMultiDictProxy

from aireserve_sim.config import SimConfig
from aireserve_sim.embedded import EmbeddedSimulator
from bot.clock import ManualClock

API_KEY = "sk-sim-test-key"
START = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
SHAPE = {"accelerator": "h100-sxm-80gb", "gpusPerNode": 8, "nodes": 2}
_UNSET: Any = object()


@dataclass
class Reply:
    """One HTTP answer, fully read."""

    status: int
    headers: CIMultiDictProxy[str]
    text: str
    body: Any

    @property
    def error(self) -> dict[str, Any]:
        return self.body["error"]  # type: ignore[no-any-return]


class Api:
    """Raw HTTP against the simulator: bearer auth by default, admin calls with X-Sim-Admin."""

    def __init__(self, session: aiohttp.ClientSession, sim: EmbeddedSimulator) -> None:
        self.session = session
        self.sim = sim

    async def call(
        self, method: str, path: str, *, json: Any = _UNSET, data: Any = None,
        headers: dict[str, str] | None = None, key: str | None = API_KEY,
        params: dict[str, str] | None = None,
    ) -> Reply:
        hdrs = {"Authorization": f"Bearer {key}"} if key is not None else {}
        hdrs.update(headers or {})
        url = self.sim.root_url + path
        kw: dict[str, Any] = {"headers": hdrs, "params": params}
        if json is not _UNSET:
            kw["json"] = json
        elif data is not None:
            kw["data"] = data
        async with self.session.request(method, url, **kw) as resp:
            text = await resp.text()
            try:
                body = jsonlib.loads(text) if text else None
            except ValueError:
                body = None
            return Reply(resp.status, resp.headers, text, body)

    async def admin(self, method: str, path: str, json: Any = _UNSET, **kw: Any) -> Reply:
        headers = {"X-Sim-Admin": "1", **kw.pop("headers", {})}
        return await self.call(method, "/_sim" + path, json=json, headers=headers, key=None, **kw)

    async def advance(self, seconds: float) -> None:
        reply = await self.admin("POST", "/clock/advance", {"seconds": seconds})
        assert reply.status == 200, reply.text

    async def quote(self, **body: Any) -> dict[str, Any]:
        reply = await self.call("POST", "/v1/clusters/quote",
                                json={"shape": SHAPE, "location": "us-tx", **body})
        assert reply.status == 201, reply.text
        return reply.body  # type: ignore[no-any-return]

    async def launch(self, quote_id: str, *, key: str | None = None, **body: Any) -> Reply:
        headers = {"Idempotency-Key": key} if key is not None else None
        return await self.call("POST", "/v1/clusters", json={"quoteId": quote_id, **body},
                               headers=headers)

    async def running_cluster(self, **quote_body: Any) -> dict[str, Any]:
        quote = await self.quote(**quote_body)
        launched = await self.launch(quote["id"])
        assert launched.status == 201, launched.text
        await self.advance(120)
        cluster = await self.call("GET", f"/v1/clusters/{launched.body['id']}")
        assert cluster.body["status"] == "running", cluster.text
        return cluster.body  # type: ignore[no-any-return]


def assert_error(reply: Reply, status: int, code: str | None = None) -> dict[str, Any]:
    """The contract's envelope (§2.6), consistent with the status line and X-Request-Id."""
    assert reply.status == status, reply.text
    assert reply.headers["Content-Type"] == "application/json; charset=utf-8"
    error = reply.error
    assert error["status"] == status
    assert isinstance(error["message"], str) and error["message"]
    assert error["requestId"].startswith("req_")
    assert error["requestId"] == reply.headers["X-Request-Id"]
    assert isinstance(error["details"], dict)
    if code is not None:
        assert error["code"] == code, reply.text
    return error


@pytest.fixture(autouse=True)
def _no_simulator_bugs(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """No request in these tests may reach the server's 500 path (it logs each bug once)."""
    yield
    bugs = [r for r in caplog.records
            if r.name == "aireserve_sim.server" and r.levelno >= logging.ERROR]
    assert not bugs, [r.getMessage() for r in bugs]


@pytest_asyncio.fixture
async def http_session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


@pytest_asyncio.fixture
async def make_api(
    http_session: aiohttp.ClientSession,
) -> AsyncIterator[Callable[..., Any]]:
    """Start more simulators (other configs, an api key); all are closed after the test."""
    started: list[EmbeddedSimulator] = []

    async def make(config: SimConfig | None = None, **kw: Any) -> Api:
        sim = EmbeddedSimulator(config or SimConfig.fast(), ManualClock(START), **kw)
        await sim.start()
        started.append(sim)
        return Api(http_session, sim)

    yield make
    for sim in started:
        await sim.close()


@pytest_asyncio.fixture
async def api(make_api: Callable[..., Any]) -> Api:
    return await make_api()  # type: ignore[no-any-return]
