"""The `/_sim` control surface (contract §11): what a test or a demo does to the simulated world.

Guarded by `X-Sim-Admin: 1` in the server's pipeline; no bearer key, no rate limits, no
idempotency, no faults. Production code never calls these.

    GET  /_sim/clock                                  {now, virtual}
    POST /_sim/clock/advance {seconds}                {now, virtual}   (virtual clock only)
    POST /_sim/clusters/{id}/nodes/{rank}/fail {mode: stopped|unhealthy}   → cluster
    POST /_sim/clusters/{id}/nodes/{rank}/recoverable {value: bool}        → cluster
    POST /_sim/clusters/seed {count ≤ 10000, accelerator?, gpusPerNode?, nodes?}
                                                      {data: [cluster ids]}  (201; many at once,
                                                      each from its own quote, provisioning)
    POST /_sim/clusters/{id}/nodes/{rank}/log {line, stream?}   → logs (the line as stored)
    POST /_sim/capacity {accelerator, location, availability?, placeableNodes?}
    POST /_sim/account {balanceCents}                 → account
    GET|POST|DELETE /_sim/faults                      (see faults.py)
    POST /_sim/faults/items                           one cluster's field wrong or missing
    GET  /_sim/ledger                                 {data: [{at, kind, resourceId, cents, …}]}
    POST /_sim/reset
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from aiohttp import web
from pydantic import Field, StrictBool, StrictFloat, StrictInt, StrictStr

from aireserve_sim.faults import FaultRequest, ItemFault
from aireserve_sim.http_io import json_response, parse_model
from aireserve_sim.server_state import ServerState
from bot.clock import ManualClock
from bot.reserve.errors import InvalidRequest, InvalidState
from bot.reserve.schemas import Availability, ShapeRequest, WireRequest, format_timestamp

_TEN_YEARS = 10 * 366 * 86400


class _Advance(WireRequest):
    seconds: Annotated[StrictFloat, Field(ge=0, le=_TEN_YEARS, allow_inf_nan=False)]


class _Fail(WireRequest):
    mode: Literal["stopped", "unhealthy"]


class _Log(WireRequest):
    line: Annotated[StrictStr, Field(min_length=1, max_length=4000)]
    stream: Literal["stdout", "stderr", "system"] = "stdout"


class _Recoverable(WireRequest):
    value: StrictBool


class _Capacity(WireRequest):
    accelerator: StrictStr
    location: StrictStr
    availability: Literal["high", "medium", "low", "none"] | None = None
    placeable_nodes: Annotated[StrictInt, Field(ge=0, le=1000)] | None = None


class _Seed(WireRequest):
    count: Annotated[StrictInt, Field(ge=1, le=10_000)]
    accelerator: StrictStr = "h100-sxm-80gb"
    gpus_per_node: Annotated[StrictInt, Field(ge=1, le=8)] = 8
    nodes: Annotated[StrictInt, Field(ge=2, le=8)] = 2


class _Balance(WireRequest):
    balance_cents: Annotated[StrictInt, Field(ge=0, le=10**12)]


class ControlApi:
    """Handlers for `/_sim`; each parses, calls the engine (or the server's state), renders."""

    def __init__(self, state: ServerState) -> None:
        self._state = state
        self._engine = state.engine

    def register(self, router: web.UrlDispatcher) -> None:
        router.add_get("/_sim/clock", self.clock, allow_head=False)
        router.add_post("/_sim/clock/advance", self.advance)
        router.add_post("/_sim/clusters/{id}/nodes/{rank}/fail", self.fail_node)
        router.add_post("/_sim/clusters/{id}/nodes/{rank}/recoverable", self.recoverable)
        router.add_post("/_sim/clusters/seed", self.seed)
        router.add_post("/_sim/clusters/{id}/nodes/{rank}/log", self.append_log)
        router.add_post("/_sim/capacity", self.capacity)
        router.add_post("/_sim/account", self.balance)
        router.add_get("/_sim/faults", self.list_faults, allow_head=False)
        router.add_post("/_sim/faults", self.add_fault)
        router.add_post("/_sim/faults/items", self.add_item_fault)
        router.add_delete("/_sim/faults", self.clear_faults)
        router.add_get("/_sim/ledger", self.ledger, allow_head=False)
        router.add_post("/_sim/reset", self.reset)

    def _clock_body(self) -> dict[str, Any]:
        virtual = isinstance(self._engine.clock, ManualClock)
        return {"now": format_timestamp(self._engine.clock.now()), "virtual": virtual}

    async def clock(self, request: web.Request) -> web.Response:
        return json_response(200, self._clock_body())

    async def advance(self, request: web.Request) -> web.Response:
        seconds = parse_model(request, _Advance).seconds
        if not isinstance(self._engine.clock, ManualClock):
            raise InvalidState(
                "The simulator runs on the real clock; start it with a virtual clock to advance.",
                details={"status": "real_clock"},
            )
        self._engine.advance(seconds)
        return json_response(200, self._clock_body())

    async def fail_node(self, request: web.Request) -> web.Response:
        mode = parse_model(request, _Fail).mode
        return json_response(200, self._engine.fail_node(*_node(request), mode).to_wire())

    async def append_log(self, request: web.Request) -> web.Response:
        req = parse_model(request, _Log)
        return json_response(
            200, self._engine.append_log(*_node(request), req.line, req.stream).to_wire())

    async def recoverable(self, request: web.Request) -> web.Response:
        value = parse_model(request, _Recoverable).value
        return json_response(200, self._engine.set_recoverable(*_node(request), value).to_wire())

    async def seed(self, request: web.Request) -> web.Response:
        req = parse_model(request, _Seed)
        shape = ShapeRequest(accelerator=req.accelerator, gpus_per_node=req.gpus_per_node,
                             nodes=req.nodes)
        return json_response(201, {"data": self._engine.seed_clusters(count=req.count,
                                                                      shape=shape)})

    async def capacity(self, request: web.Request) -> web.Response:
        req = parse_model(request, _Capacity)
        self._engine.set_capacity(
            accelerator=req.accelerator, location=req.location,
            availability=Availability(req.availability) if req.availability else None,
            placeable_nodes=req.placeable_nodes,
        )
        return json_response(200, req.to_wire())

    async def balance(self, request: web.Request) -> web.Response:
        cents = parse_model(request, _Balance).balance_cents
        return json_response(200, self._engine.set_balance(cents).to_wire())

    async def list_faults(self, request: web.Request) -> web.Response:
        return json_response(200, {"data": [r.to_wire() for r in self._state.faults.rules]})

    async def add_fault(self, request: web.Request) -> web.Response:
        rule = self._state.faults.add(parse_model(request, FaultRequest))
        return json_response(201, rule.to_wire())

    async def add_item_fault(self, request: web.Request) -> web.Response:
        fault = self._state.faults.corrupt(parse_model(request, ItemFault))
        return json_response(201, fault.to_wire())

    async def clear_faults(self, request: web.Request) -> web.Response:
        self._state.faults.clear()
        return json_response(200, {"data": []})

    async def ledger(self, request: web.Request) -> web.Response:
        entries = [
            {"at": format_timestamp(e.at), "kind": e.kind, "resourceId": e.resource_id,
             "cents": e.cents, "paid": e.paid, "note": e.note}
            for e in self._engine.ledger()
        ]
        return json_response(200, {"data": entries})

    async def reset(self, request: web.Request) -> web.Response:
        self._state.reset()
        return json_response(200, {"ok": True, **self._clock_body()})


def _node(request: web.Request) -> tuple[str, int]:
    """The cluster id and the node rank a `/_sim/clusters/{id}/nodes/{rank}/…` path names."""
    raw = request.match_info["rank"]
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 3):
        raise InvalidRequest(
            f"A node rank is a small non-negative integer (got {raw[:40]!r}).",
            details={"field": "rank", "reason": "invalid_value"},
        )
    return request.match_info["id"], int(raw)
