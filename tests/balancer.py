"""A loopback load balancer that follows readiness, as a cloud load balancer or kube-proxy in
front of a Kubernetes Service does: it polls every replica's `/readyz` on its internal port
every `probe_every` seconds and sends Slack's requests only to the replicas whose last probe
answered 200, round robin. What it cannot deliver it answers itself, as such a proxy does,
and counts: a refused or cut connection to the replica it picked (502), no ready replica
(503). It never retries: Slack retries neither slash commands nor clicks.

    async with Balancer(bots, probe_every=0.5).running() as lb:
        SlackRequests(events_url=f"{lb.url}/slack/events", …)   # Slack's requests, via lb
        lb.lost                                                 # what it could not deliver

A replica restarted with PORT=0 comes back on a new port: each probe reads the replica's
current URLs (`BotProcess.url`, `.internal_url`), as kube-proxy follows a pod's new address.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import aiohttp
from aiohttp import web

from tests.procs import BotProcess

_HOP = {"host", "content-length", "transfer-encoding", "connection", "keep-alive"}


@dataclass
class Balancer:
    bots: Sequence[BotProcess]
    probe_every: float = 0.5
    # As deploy/kubernetes/deployment.yaml's readinessProbe: a probe waits up to 4 s (/readyz's
    # own database check gives up after 3), and two failures in a row take a replica out.
    timeout: float = 4.0
    failure_threshold: int = 2
    ready: set[str] = field(default_factory=set)  # names of the replicas routed to now
    served: Counter[str] = field(default_factory=Counter)  # answers relayed, per replica
    lost: list[str] = field(default_factory=list)  # what it could not deliver, and why
    changes: list[tuple[float, str, object]] = field(default_factory=list)  # (t, who, why)
    url: str = ""
    _turn: int = 0
    _probed: asyncio.Event = field(default_factory=asyncio.Event)

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Balancer]:
        app = web.Application()
        app.router.add_post("/{tail:.*}", self._forward)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        self.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
        # A new connection per request, as an L4 proxy opens one per client connection: a
        # kept-alive one would hide (or add) failures of its own.
        timeout = aiohttp.ClientTimeout(total=10)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True),
                                         timeout=timeout) as self._session:
            probing = [asyncio.create_task(self._probe_forever(bot)) for bot in self.bots]
            try:
                yield self
            finally:
                for task in probing:
                    task.cancel()
                await asyncio.gather(*probing, return_exceptions=True)
                await runner.cleanup()

    async def probed(self) -> None:
        """Return after the next probe of any replica."""
        self._probed.clear()
        await self._probed.wait()

    async def _probe_forever(self, bot: BotProcess) -> None:
        failures = 0
        while True:
            answer = await self._probe(bot)
            failures = 0 if answer is True else failures + 1
            ready = self.ready | {bot.name} if answer is True else (
                self.ready - {bot.name} if failures >= self.failure_threshold else self.ready)
            if ready != self.ready:
                self.changes.append((time.monotonic(), bot.name, answer))
            self.ready = ready
            self._probed.set()
            await asyncio.sleep(self.probe_every)  # the probe period, as a load balancer's

    async def _probe(self, bot: BotProcess) -> object:
        """True when ready; else what it answered (or why it didn't)."""
        if not bot.internal_url:
            return "not started"
        try:
            async with self._session.get(f"{bot.internal_url}/readyz",
                                         timeout=aiohttp.ClientTimeout(total=self.timeout)
                                         ) as r:
                return r.status == 200 or f"{r.status} {await r.text()}"
        except (aiohttp.ClientError, TimeoutError) as exc:
            return type(exc).__name__

    async def _forward(self, request: web.Request) -> web.Response:
        routed = [bot for bot in self.bots if bot.name in self.ready]
        if not routed:
            self.lost.append("no ready replica (503)")
            return web.Response(status=503, text="no healthy upstream")
        self._turn += 1
        bot = routed[self._turn % len(routed)]
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        try:
            async with self._session.post(f"{bot.url}{request.path_qs}", headers=headers,
                                          data=await request.read()) as reply:
                body = await reply.read()
                self.served[bot.name] += 1
                return web.Response(status=reply.status, body=body,
                                    content_type=reply.content_type)
        except (aiohttp.ClientError, TimeoutError) as exc:
            self.lost.append(f"{bot.name}: {type(exc).__name__} (502)")
            return web.Response(status=502, text="upstream connect error")
