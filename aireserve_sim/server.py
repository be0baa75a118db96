"""The simulator's HTTP face: the contract's `/v1` surface (§3) and the `/_sim` controls (§11).

`create_app(engine)` wraps a `SimulatorEngine` in an aiohttp application. The engine owns every
rule about clusters, money and time; the server translates HTTP into engine calls and answers
(or typed errors) back into HTTP, and owns what belongs to a server: bearer auth, request ids,
rate limits (ratelimit.py), idempotency keys (idempotency.py) and injected faults (faults.py).
Parsing lives in http_io.py, the `/_sim` handlers in control.py.

Every request runs through one middleware, in this order:

1. a fresh `X-Request-Id` (`req_…`), stamped on whatever answer leaves, errors included;
2. `/_sim/*` needs `X-Sim-Admin: 1` (else 403) and no bearer; `GET /v1/health` only a fault;
3. `/v1/*`: bearer auth (401) → rate limits (429; headers on every later answer) → unknown
   route or method (404) → injected fault → JSON body (400) → Idempotency-Key (replay / 409 /
   422) → the handler, whose typed errors become the contract's envelope.
Anything else escaping a handler is a simulator bug: logged once, answered 500.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import secrets
from collections.abc import Awaitable, Callable
from email.utils import format_datetime
from importlib import metadata

from aiohttp import web

import bot.reserve.schemas as s
from aireserve_sim import http_io as io
from aireserve_sim.control import ControlApi
from aireserve_sim.engine import SimulatorEngine
from aireserve_sim.faults import FaultRule, cut
from aireserve_sim.idempotency import (
    REPLAYED_HEADERS,
    StoredResponse,
    validate_key,
)
from aireserve_sim.ratelimit import RateLimiter, policies_for
from aireserve_sim.server_state import ServerState
from bot.reserve.errors import (
    ApiError,
    Forbidden,
    InternalError,
    NotFound,
    RateLimited,
    Unauthenticated,
)

_log = logging.getLogger(__name__)

MAX_TAIL = 5000

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


STATE = web.AppKey("aireserve_simulator", ServerState)
# Headers every answer to a request carries (request id, rate-limit state), stamped in
# `on_response_prepare` so that streamed (SSE) answers get them too.
_HEADERS = web.RequestKey("aireserve_headers", dict[str, str])


def create_app(engine: SimulatorEngine, *, api_key: str | None = None) -> web.Application:
    """The simulator as an aiohttp application.

    With `api_key` set only that bearer token is accepted; without it any non-empty one is.
    """
    state = ServerState(
        engine=engine, api_key=api_key, limiter=RateLimiter(enforce=engine.config.rate_limits)
    )
    # The pipeline answers an oversized body with the contract's 400; aiohttp's limit backs it.
    app = web.Application(middlewares=[_pipeline], client_max_size=io.MAX_BODY_BYTES)
    app[STATE] = state
    app.on_response_prepare.append(_stamp_headers)
    _PublicApi(engine).register(app.router)
    ControlApi(state).register(app.router)
    return app


# --- the pipeline ---------------------------------------------------------------------------


@web.middleware
async def _pipeline(request: web.Request, handler: Handler) -> web.StreamResponse:
    request[_HEADERS] = {"X-Request-Id": f"req_{secrets.token_hex(8)}"}
    state = request.app[STATE]
    try:
        path = request.path
        if path == "/_sim" or path.startswith("/_sim/"):
            return await _serve_control(request, handler)
        if request.method == "GET" and path == "/v1/health":
            state.faults.refuse("GET", path)  # an outage armed on it takes it down too
            return await handler(request)
        if path.startswith("/v1/"):
            return await _serve_v1(request, handler, state)
        raise NotFound(f"No route {request.method} {path}.", details={"resource": "route"})
    except ApiError as err:
        return error_response(request, err)
    except Exception:
        _log.exception("simulator bug while serving %s %s", request.method, request.path)
        return error_response(request, InternalError("Unexpected simulator error."))


async def _serve_control(request: web.Request, handler: Handler) -> web.StreamResponse:
    if request.headers.get("X-Sim-Admin") != "1":
        raise Forbidden("Simulator control endpoints need the header 'X-Sim-Admin: 1'.")
    _require_route(request)
    request[io.BODY] = await io.read_body(request)
    return (await _execute(request, handler))[0]


async def _serve_v1(
    request: web.Request, handler: Handler, state: ServerState
) -> web.StreamResponse:
    method, path = request.method, request.path
    api_key = _authenticate(request, state.api_key)
    _check_rate(request, state, api_key)
    _require_route(request)

    fault = state.faults.take(method, path)
    if fault is not None and fault.status is not None and not fault.fails_after_running:
        await asyncio.sleep(fault.delay_seconds)
        if fault.body == "html":
            return fault.html_page()  # a proxy in front answered, not the service
        raise fault.error()  # refused before anything ran: never stored under a key

    request[io.BODY] = await io.read_body(request)
    key = validate_key(request.headers.get("Idempotency-Key")) if method == "POST" else None
    if key is None:
        response = cut(fault, (await _execute(request, handler))[0])
        await _hold(fault)
    else:
        stored = state.idempotency.begin(
            api_key=api_key, key=key, method=method, path=path, body=request[io.BODY],
            now=state.engine.clock.now(),
        )
        if stored is not None:
            return _replay(stored)
        try:
            response, code = await _execute(request, handler)
            await _hold(fault)  # the key stays "in use" while the answer is held back
            state.idempotency.finish(
                api_key=api_key, key=key, response=_to_stored(response), code=code
            )
        finally:
            state.idempotency.abandon(api_key=api_key, key=key)
    if fault is not None and fault.fails_after_running:
        return error_response(request, fault.error())  # it ran; the answer is "lost"
    return response


async def _hold(fault: FaultRule | None) -> None:
    if fault is not None and fault.delay_seconds:
        await asyncio.sleep(fault.delay_seconds)


def _check_rate(request: web.Request, state: ServerState, api_key: str) -> None:
    decision = state.limiter.hit(
        api_key, policies_for(request.method, request.path), state.engine.clock.now()
    )
    request[_HEADERS].update(decision.headers())
    if decision.exceeded is None:
        return
    policy, seconds = decision.exceeded.policy, decision.exceeded.reset_seconds
    raise RateLimited(
        f"Rate limit '{policy.name}' exceeded ({policy.quota} requests per {policy.window} s);"
        f" retry in {seconds} s.",
        retry_after=float(seconds), details={"retryAfterSeconds": seconds, "window": policy.name},
    )


async def _execute(
    request: web.Request, handler: Handler
) -> tuple[web.StreamResponse, str | None]:
    """Run the handler; its typed errors become envelopes. Returns the answer and error code."""
    try:
        return await handler(request), None
    except ApiError as err:
        return error_response(request, err), err.code
    except Exception:
        _log.exception("simulator bug while serving %s %s", request.method, request.path)
        bug = InternalError("Unexpected simulator error.")
        return error_response(request, bug), bug.code


def error_response(request: web.Request, err: ApiError) -> web.Response:
    """The contract's error envelope (§2.6) for `err`, with the headers its code calls for."""
    headers: dict[str, str] = {}
    if err.retry_after_seconds is not None:
        headers["Retry-After"] = str(err.retry_after_seconds)
    if err.status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="aireserve"'
    request_id = request[_HEADERS]["X-Request-Id"]
    return io.json_response(err.status, err.to_body(request_id), headers)


async def _stamp_headers(request: web.Request, response: web.StreamResponse) -> None:
    for name, value in request.get(_HEADERS, {}).items():
        response.headers[name] = value
    # The engine's clock (virtual or real) is AI Reserve's time: clients set theirs by it.
    response.headers["Date"] = format_datetime(request.app[STATE].engine.clock.now(),
                                               usegmt=True)


def _require_route(request: web.Request) -> None:
    if request.match_info.http_exception is None:
        return
    if request.path.startswith("/v1/clusters/") and request.path.endswith("/stop"):
        message = "There is no stop for clusters: terminate one with DELETE /v1/clusters/{id}."
    else:
        message = f"No route {request.method} {request.path}."
    raise NotFound(message, details={"resource": "route"})


def _authenticate(request: web.Request, expected: str | None) -> str:
    header = request.headers.get("Authorization")
    if header is None:
        raise Unauthenticated("Missing 'Authorization: Bearer <api key>' header.")
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or any(c.isspace() for c in token):
        raise Unauthenticated("Malformed Authorization header: expected 'Bearer <api key>'.")
    if expected is not None and not hmac.compare_digest(token.encode(), expected.encode()):
        raise Unauthenticated("Unknown API key.")
    return token


def _to_stored(response: web.StreamResponse) -> StoredResponse:
    body = response.body if isinstance(response, web.Response) else None
    return StoredResponse(
        status=response.status,
        body=body if isinstance(body, bytes) else b"",
        content_type=response.content_type,
        headers={k: response.headers[k] for k in REPLAYED_HEADERS if k in response.headers},
    )


def _replay(stored: StoredResponse) -> web.Response:
    return web.Response(
        status=stored.status, body=stored.body, content_type=stored.content_type,
        charset="utf-8", headers={**stored.headers, "Idempotent-Replayed": "true"},
    )


# --- the /v1 surface ------------------------------------------------------------------------

Params = dict[str, str]
_V1Handler = Callable[[web.Request, Params], Awaitable[web.StreamResponse]]


class _PublicApi:
    """Handlers for contract §3: each gets its checked query parameters, calls the engine once
    and renders the answer."""

    def __init__(self, engine: SimulatorEngine) -> None:
        self._engine = engine
        try:
            self._version = metadata.version("cluster-bot")
        except metadata.PackageNotFoundError:
            self._version = "0"

    def register(self, router: web.UrlDispatcher) -> None:
        page = {"limit", "cursor"}
        # Order matters: "/v1/clusters/quote" comes before "/v1/clusters/{id}…".
        for method, path, handler, params in (
            ("GET", "/v1/health", self.health, set()),
            ("GET", "/v1/accelerators", self.accelerators, {"location", *page}),
            ("GET", "/v1/locations", self.locations, page),
            ("POST", "/v1/clusters/quote", self.quote, set()),
            ("GET", "/v1/clusters/quotes/{id}", self.get_quote, set()),
            ("POST", "/v1/clusters", self.launch, set()),
            ("GET", "/v1/clusters", self.list_clusters, {"status", *page}),
            ("GET", "/v1/clusters/{id}", self.get_cluster, set()),
            ("DELETE", "/v1/clusters/{id}", self.terminate, set()),
            ("POST", "/v1/clusters/{id}/terminate", self.terminate, set()),
            ("POST", "/v1/clusters/{id}/recover", self.recover, set()),
            ("PATCH", "/v1/clusters/{id}/recovery", self.set_recovery, set()),
            ("PATCH", "/v1/clusters/{id}", self.rename, set()),
            ("GET", "/v1/clusters/{id}/logs", self.logs, {"node", "tail", "since", "stream"}),
            ("GET", "/v1/clusters/{id}/events", self.events, page),
            ("POST", "/v1/volumes", self.create_volume, set()),
            ("GET", "/v1/volumes", self.list_volumes, page),
            ("GET", "/v1/volumes/{id}", self.get_volume, set()),
            ("PATCH", "/v1/volumes/{id}", self.update_volume, set()),
            ("DELETE", "/v1/volumes/{id}", self.delete_volume, set()),
            ("GET", "/v1/account", self.account, set()),
        ):
            # HEAD is not part of the contract: like any other unknown method it is a 404.
            router.add_route(method, path, _with_params(handler, params))

    async def health(self, request: web.Request, params: Params) -> web.Response:
        return io.json_response(200, s.Health(ok=True, version=self._version).to_wire())

    async def accelerators(self, request: web.Request, params: Params) -> web.Response:
        items = self._engine.list_accelerators(params.get("location") or None)
        return io.json_response(200, io.page(items, params))

    async def locations(self, request: web.Request, params: Params) -> web.Response:
        return io.json_response(200, io.page(self._engine.list_locations(), params))

    async def quote(self, request: web.Request, params: Params) -> web.Response:
        quote = self._engine.quote(io.parse_model(request, s.QuoteRequest))
        location = {"Location": f"/v1/clusters/quotes/{quote.id}"}
        return io.json_response(201, quote.to_wire(), location)

    async def get_quote(self, request: web.Request, params: Params) -> web.Response:
        return io.json_response(200, self._engine.get_quote(_id(request)).to_wire())

    async def launch(self, request: web.Request, params: Params) -> web.Response:
        cluster = self._engine.launch(io.parse_model(request, s.LaunchRequest))
        location = {"Location": f"/v1/clusters/{cluster.id}"}
        return io.json_response(201, cluster.to_wire(), location)

    async def list_clusters(self, request: web.Request, params: Params) -> web.Response:
        clusters = self._engine.listed_clusters(io.statuses_param(params.get("status", "")))
        page = await io.rendered_page(clusters, params)
        return io.json_response(200, request.app[STATE].faults.mangle_page(page))

    async def get_cluster(self, request: web.Request, params: Params) -> web.Response:
        cluster = self._engine.get_cluster(_id(request)).to_wire()
        return io.json_response(200, request.app[STATE].faults.mangle(cluster))

    async def terminate(self, request: web.Request, params: Params) -> web.Response:
        if request.method == "POST":  # the alias takes `{}` (or nothing), like recover
            io.parse_model(request, s.EmptyRequest)
        cluster, accepted = self._engine.terminate(_id(request))
        return io.json_response(202 if accepted else 200, cluster.to_wire())

    async def recover(self, request: web.Request, params: Params) -> web.Response:
        io.parse_model(request, s.EmptyRequest)
        return io.json_response(202, self._engine.recover(_id(request)).to_wire())

    async def set_recovery(self, request: web.Request, params: Params) -> web.Response:
        auto = io.parse_model(request, s.RecoverySetting).auto
        return io.json_response(200, self._engine.set_auto_recovery(_id(request), auto).to_wire())

    async def rename(self, request: web.Request, params: Params) -> web.Response:
        name = io.parse_model(request, s.RenameRequest).name
        return io.json_response(200, self._engine.rename(_id(request), name).to_wire())

    async def logs(self, request: web.Request, params: Params) -> web.StreamResponse:
        node = io.int_param(params, "node", default=0, low=0, high=1_000_000)
        tail = io.int_param(params, "tail", default=100, low=1, high=MAX_TAIL)
        stream = io.stream_param(params.get("stream"))
        since = io.timestamp_param(params["since"], "since") if params.get("since") else None
        sse = "text/event-stream" in request.headers.get("Accept", "").lower()
        last_id = request.headers.get("Last-Event-ID", "").strip()
        if sse and last_id:  # resuming a stream: the last line received is where we stand
            since = io.timestamp_param(last_id, "Last-Event-ID")
        logs = self._engine.logs(_id(request), node=node, tail=tail, since=since, stream=stream)
        return await _stream_logs(request, logs) if sse else io.json_response(200, logs.to_wire())

    async def events(self, request: web.Request, params: Params) -> web.Response:
        return io.json_response(200, io.page(self._engine.events(_id(request)), params))

    async def create_volume(self, request: web.Request, params: Params) -> web.Response:
        volume = self._engine.create_volume(io.parse_model(request, s.VolumeCreateRequest))
        location = {"Location": f"/v1/volumes/{volume.id}"}
        return io.json_response(201, volume.to_wire(), location)

    async def list_volumes(self, request: web.Request, params: Params) -> web.Response:
        return io.json_response(200, io.page(self._engine.list_volumes(), params))

    async def get_volume(self, request: web.Request, params: Params) -> web.Response:
        return io.json_response(200, self._engine.get_volume(_id(request)).to_wire())

    async def update_volume(self, request: web.Request, params: Params) -> web.Response:
        req = io.parse_model(request, s.VolumeUpdateRequest)
        return io.json_response(200, self._engine.update_volume(_id(request), req).to_wire())

    async def delete_volume(self, request: web.Request, params: Params) -> web.Response:
        return io.json_response(202, self._engine.delete_volume(_id(request)).to_wire())

    async def account(self, request: web.Request, params: Params) -> web.Response:
        return io.json_response(200, self._engine.account().to_wire())


def _with_params(handler: _V1Handler, allowed: set[str]) -> Handler:
    async def checked(request: web.Request) -> web.StreamResponse:
        return await handler(request, io.query(request, allowed))

    return checked


def _id(request: web.Request) -> str:
    return request.match_info["id"]


async def _stream_logs(request: web.Request, logs: s.Logs) -> web.StreamResponse:
    """A finite SSE answer: every line that exists now, `id:` = its timestamp, then close."""
    response = web.StreamResponse(status=200, headers={"Cache-Control": "no-cache"})
    response.content_type = "text/event-stream"
    response.charset = "utf-8"
    await response.prepare(request)
    for line in logs.lines:
        payload = line.to_wire()
        await response.write(f"id: {payload['ts']}\ndata: {io.dumps(payload)}\n\n".encode())
    await response.write_eof()
    return response
