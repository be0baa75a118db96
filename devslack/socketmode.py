"""Slack's Socket Mode, served by FakeSlack on loopback.

The app calls `apps.connections.open` with its app-level token (xapp-…) and gets a one-use
WebSocket URL (`ws://127.0.0.1:<port>/link/?ticket=…&app_id=…`). On connect the server sends
`hello`; afterwards every request Slack would POST to a Request URL arrives as an envelope

    {"envelope_id": …, "type": "slash_commands" | "interactive" | "events_api",
     "payload": …, "accepts_response_payload": bool, ("retry_attempt", "retry_reason")}

and the app acks it by sending `{"envelope_id": …}` back, with `"payload": …` when it answers
(a slash command's ephemeral text, a view_submission's response_action). Each envelope goes to
one connection only, taking turns among the open ones (several replicas, each connected, share
the work as with Slack); a connection told to `disconnect` gets no more. `disconnect` (reason
`warning` or `refresh_requested`) tells the app to open a new connection; with
`refresh_requested` the old one is closed once the new one has said hello (or after a grace
period). Shapes follow Slack's Socket Mode docs and
slack_sdk's `SocketModeClient`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from devslack.models import ACK_DEADLINE

LINK_PATH = "/link/"
DEBUG_HOST = "devslack-link"
CLOSE_GRACE = 5.0  # seconds an old connection stays open after `refresh_requested`


@dataclass
class Ack:
    """What the app sent back for one envelope, and on which connection."""

    envelope_id: str
    payload: dict[str, Any] | None
    connection: int


@dataclass
class Delivery:
    """The outcome of one envelope: the ack (None: none within the deadline) and its delay."""

    envelope: dict[str, Any]
    ack: Ack | None
    elapsed: float


@dataclass
class _Connection:
    number: int
    ws: web.WebSocketResponse
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    retiring: bool = False  # told to disconnect: no new envelopes


class SocketModeServer:
    """The WebSocket side of FakeSlack: tickets, connections, envelopes and their acks."""

    def __init__(self, *, app_id: str) -> None:
        self.app_id = app_id
        self.envelopes: list[dict[str, Any]] = []  # every envelope sent, in order
        self.acks: list[Ack] = []  # every ack received, in order
        self.problems: list[str] = []  # frames Slack would not understand
        self.connections_opened = 0
        self.refusing = 0  # the next this many connection attempts are refused (`refuse`)
        self._tickets: set[str] = set()
        self._live: list[_Connection] = []
        self._pending: dict[str, asyncio.Future[Ack]] = {}
        self._changed = asyncio.Event()
        self._numbers = itertools.count(1)
        self._envelope_ids = itertools.count(1)
        self._turns = itertools.count()

    def add_routes(self, app: web.Application) -> None:
        app.router.add_get(LINK_PATH, self._serve)

    def issue_url(self, base_url: str) -> str:
        """A fresh one-use WebSocket URL (what `apps.connections.open` answers)."""
        ticket = secrets.token_hex(8)
        self._tickets.add(ticket)
        ws_base = base_url.replace("http://", "ws://", 1)
        return f"{ws_base}{LINK_PATH}?ticket={ticket}&app_id={self.app_id}"

    @property
    def connected(self) -> bool:
        return bool(self._open())

    def _open(self) -> list[_Connection]:
        return [c for c in self._live if not c.retiring]

    async def wait_connected(self, *, more_than: int = 0, count: int = 1,
                             within: float = 10.0) -> None:
        """Wait until `count` open connections numbered above `more_than` have said hello."""
        async with asyncio.timeout(within):
            while sum(c.number > more_than for c in self._open()) < count:
                self._changed.clear()
                await self._changed.wait()

    # -- envelopes ---------------------------------------------------------------------------

    async def deliver(self, kind: str, payload: dict[str, Any], *, accepts_response_payload: bool,
                      retry_attempt: int | None = None, retry_reason: str | None = None,
                      envelope_id: str | None = None, within: float = ACK_DEADLINE
                      ) -> Delivery:
        """Send one envelope on the newest connection and wait (up to `within` s) for its ack.

        Pass the `envelope_id` of an earlier envelope to redeliver it, as Slack does with an
        event nobody acked (with `retry_attempt` counting up)."""
        started = time.perf_counter()
        await self.wait_connected(within=within)
        envelope: dict[str, Any] = {
            "envelope_id": envelope_id or f"{next(self._envelope_ids):04d}-"
                                          f"{secrets.token_hex(4)}",
            "payload": payload,
            "type": kind,
            "accepts_response_payload": accepts_response_payload,
        }
        if kind == "events_api":
            envelope["retry_attempt"] = retry_attempt or 0
            envelope["retry_reason"] = retry_reason or ""
        future: asyncio.Future[Ack] = asyncio.get_running_loop().create_future()
        self._pending[envelope["envelope_id"]] = future
        self.envelopes.append(envelope)
        try:
            candidates = self._open()
            await candidates[next(self._turns) % len(candidates)].ws.send_str(
                json.dumps(envelope))
            ack: Ack | None = await asyncio.wait_for(future, within)
        except TimeoutError:
            ack = None
        finally:
            self._pending.pop(envelope["envelope_id"], None)
        return Delivery(envelope, ack, time.perf_counter() - started)

    def acks_for(self, envelope_id: str) -> list[Ack]:
        return [a for a in self.acks if a.envelope_id == envelope_id]

    async def disconnect(self, reason: str = "refresh_requested", *,
                         within: float = 10.0) -> None:
        """Ask the app to reconnect, and wait until it has (as many new connections as there
        were open ones have said hello: one per replica).

        With `refresh_requested` the old connections are then closed from this side, as
        Slack does; a `warning` leaves them open (Slack closes them later)."""
        old = self._open()
        newest = max((c.number for c in self._live), default=0)
        message = {"type": "disconnect", "reason": reason, "debug_info": {"host": DEBUG_HOST}}
        for connection in old:
            connection.retiring = True
            await connection.ws.send_str(json.dumps(message))
        await self.wait_connected(more_than=newest, count=max(len(old), 1), within=within)
        if reason == "refresh_requested":
            for connection in old:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(connection.closed.wait(), CLOSE_GRACE)
                await connection.ws.close()

    def refuse(self, count: int) -> None:
        """Slack's WebSocket end is down: the next `count` upgrades answer 503 (the ticket
        stays good for a later try, as a URL does while Slack is away)."""
        self.refusing = count

    async def close(self) -> None:
        """Close every connection (FakeSlack is stopping; or the link drops)."""
        for connection in list(self._live):
            await connection.ws.close()

    # -- the WebSocket -----------------------------------------------------------------------

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        if self.refusing > 0:
            self.refusing -= 1
            raise web.HTTPServiceUnavailable(text="socket mode is unavailable")
        ticket = request.query.get("ticket", "")
        if ticket not in self._tickets:  # unknown or already used: Slack refuses the upgrade
            raise web.HTTPUnauthorized(text="invalid ticket")
        self._tickets.discard(ticket)
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        connection = _Connection(next(self._numbers), ws)
        self.connections_opened += 1
        await ws.send_str(json.dumps({
            "type": "hello",
            "num_connections": len(self._live) + 1,
            "debug_info": {"host": DEBUG_HOST, "build_number": 1,
                           "approximate_connection_time": 18060},
            "connection_info": {"app_id": self.app_id},
        }))
        self._live.append(connection)
        self._changed.set()
        try:
            async for frame in ws:
                if frame.type == WSMsgType.TEXT:
                    self._receive(frame.data, connection.number)
        finally:
            self._live.remove(connection)
            connection.closed.set()
            self._changed.set()
        return ws

    def _receive(self, data: str, number: int) -> None:
        try:
            message = json.loads(data)
        except ValueError:
            self.problems.append(f"not JSON: {data[:200]!r}")
            return
        envelope_id = message.get("envelope_id") if isinstance(message, dict) else None
        if not isinstance(envelope_id, str):
            self.problems.append(f"a frame without an envelope_id: {data[:200]!r}")
            return
        payload = message.get("payload")
        if payload is not None and not isinstance(payload, dict):
            self.problems.append(f"an ack whose payload is not an object: {data[:200]!r}")
            payload = None
        ack = Ack(envelope_id, payload, number)
        self.acks.append(ack)
        future = self._pending.get(envelope_id)
        if future is not None and not future.done():
            future.set_result(ack)
