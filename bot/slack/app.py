"""Build the Bolt app: one listener module per Slack surface, the error handler, the HTTP route.

Bolt's request verification (signature + 5-minute timestamp window) guards every HTTP request:
unsigned, forged or stale requests get 401 before any listener runs; signed ones that aren't
shaped as Slack sends them (bot/slack/inbound.py) get 400. No input gets a 500. A request
from another workspace than the installation's is refused before any listener runs, whatever
its kind (bot/slack/gate.py).
"""

from __future__ import annotations

import asyncio
import logging
import math
import secrets
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import aiohttp
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response
from slack_bolt.async_app import AsyncApp
from slack_bolt.context.respond.async_respond import AsyncRespond
from slack_bolt.context.respond.internals import _build_message
from slack_bolt.logger.messages import warning_client_prioritized_and_token_skipped
from slack_bolt.oauth.async_oauth_flow import AsyncOAuthFlow
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook import WebhookResponse
from slack_sdk.webhook.async_client import AsyncWebhookClient

from bot.logs import begin
from bot.services.container import Services
from bot.slack import actions, commands, errors, home, inbound, views
from bot.slack.direct import DirectMiddleware, body_only, takes_req_resp_next
from bot.slack.gate import only_installation
from bot.slack.inflight import ACK_SENT, WORK_SLOTS, InFlight, WorkSlots
from bot.slack.oauth import oauth_routes
from bot.slack.once import once
from bot.slack.origin import kind_of
from bot.slack.signals import Signals
from bot.slack.tenancy import Tenancy

log = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"
MAX_BODY = 1 << 20


class _NoTokenWarning(logging.Filter):
    """Bolt warns that SLACK_BOT_TOKEN (read from the environment) is unused when it is given
    the client that already carries that token: true, expected, and noise on every start."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != warning_client_prioritized_and_token_skipped()


def _bolt_logger() -> logging.Logger:
    logger = logging.getLogger("slack_bolt")
    if not any(isinstance(f, _NoTokenWarning) for f in logger.filters):
        logger.addFilter(_NoTokenWarning())
    return logger


class AckingApp(AsyncApp):
    """Bolt's AsyncApp, told when a request's answer is handed back (HTTP and Socket Mode both
    come through `async_dispatch`): the ack time for the metrics, the event a listener's
    work after its ack waits for, and the slots that work takes turns in (bot/slack/inflight.py).

    Not a Bolt middleware: Bolt runs middleware one after the other *before* the listener, and
    their `next()` returns at once, so a middleware can't see the ack."""

    on_ack: Callable[[str, float], None] | None = None
    work_slots: WorkSlots | None = None
    acking = 0  # requests dispatched and not answered yet
    last_request = -math.inf  # time.monotonic() when the last one came in

    def quiet(self, now: float, for_seconds: float) -> bool:
        """No request is waiting for its ack and none came in during the last `for_seconds`
        (at `now`, by time.monotonic): a lull, when pausing the loop delays no ack
        (bot/app/collector.py)."""
        return self.acking == 0 and now - self.last_request >= for_seconds

    def middleware(self, *args: Any) -> Callable[..., Any] | None:
        """Bolt's, but a middleware of (req, resp, next) is called with just those
        (bot/slack/direct.py)."""
        if len(args) == 1 and takes_req_resp_next(args[0]):
            self._async_middleware_list.append(DirectMiddleware(
                app_name=self.name, func=args[0], base_logger=self._base_logger))
            return args[0]  # type: ignore[no-any-return]
        return super().middleware(*args)

    def _register_listener(self, functions: Any, primary_matcher: Any,
                           *args: Any, **kwargs: Any) -> Any:
        """Bolt's, the listener's builtin matcher called with the body alone
        (bot/slack/direct.py)."""
        return super()._register_listener(functions, body_only(primary_matcher), *args, **kwargs)

    async def async_dispatch(self, req: AsyncBoltRequest) -> BoltResponse:
        self.last_request = started = time.monotonic()
        self.acking += 1
        req.context[ACK_SENT] = sent = asyncio.Event()
        if self.work_slots is None:
            self.work_slots = WorkSlots()
        req.context[WORK_SLOTS] = self.work_slots
        try:
            return await super().async_dispatch(req)
        finally:
            self.acking -= 1
            # The listener's work after its ack may begin — one turn of the loop from now, so
            # whoever awaited this dispatch (the HTTP route, the Socket Mode adapter) writes
            # the answer first.
            asyncio.get_running_loop().call_soon(sent.set)
            kind, seconds = kind_of(req.body), time.monotonic() - started
            # One line per request, with its request id (bot/logs.py), in place of an access log.
            log.debug("acked a %s in %.0f ms", kind, seconds * 1000)
            if self.on_ack is not None:
                self.on_ack(kind, seconds)


class SessionRespond(AsyncRespond):
    """Bolt's `respond` (a reply through the request's response_url), over the bot's Slack HTTP
    session: Bolt's own opens a new session, so a new connection, for every reply."""

    def __init__(self, *, response_url: str, session: aiohttp.ClientSession) -> None:
        super().__init__(response_url=response_url)
        self._session = session

    async def __call__(self, *args: Any, **kwargs: Any) -> WebhookResponse:
        whole = args[0] if args and isinstance(args[0], dict) else None
        message = (_build_message(**whole) if whole is not None
                   else _build_message(*args, **kwargs))
        return await AsyncWebhookClient(url=str(self.response_url),
                                        session=self._session).send_dict(message)


def build_app(*, services: Services, client: AsyncWebClient, signing_secret: str | None,
              inflight: InFlight, dm_channel: Callable[[str], Awaitable[str]],
              on_ack: Callable[[str, float], None] | None = None,
              tenancy: Tenancy | None = None, signals: Signals | None = None) -> AckingApp:
    """`on_ack(kind, seconds)` is told how long each request took to ack (the metrics);
    `tenancy` finds each request's installation (OAuth: bot/slack/tenancy.py), else the
    client's one token serves every request; `signals` acts on Slack's events about the
    bot's channels, people and token (bot/slack/signals.py)."""
    app = AckingApp(
        # Named: without a name Bolt calls inspect.stack() to take its caller's file name, which
        # reads the source of every frame (~0.1 s for each app built).
        name="cluster-bot",
        client=client,
        # Bolt's own may return None (not installed) too.
        authorize=tenancy.authorize if tenancy else None,  # type: ignore[arg-type]
        signing_secret=signing_secret,
        # HTTP requests are verified before Bolt sees them (http_app), against the current AND
        # the previous secret during a rotation; Bolt knows one secret only. Socket Mode has no
        # signature to check.
        request_verification_enabled=False,
        process_before_response=False,  # ack first; the listener's work runs after the 200
        raise_error_for_unhandled_request=False,
        logger=_bolt_logger(),
    )
    app.on_ack = on_ack

    @app.middleware
    async def request_context(req: AsyncBoltRequest, resp: BoltResponse,
                              next: Callable[[], Awaitable[None]]) -> None:
        # Bound before the listener's task exists: it inherits them (bot/logs.py).
        begin(request_id=secrets.token_hex(6), slack_user=req.context.user_id)
        # The app's own client, not the plain one Bolt makes per request: listeners' calls are
        # counted in the metrics like every other, and share the Slack session.
        req.context["client"] = client
        if req.context.response_url and client.session is not None:
            req.context["respond"] = SessionRespond(response_url=req.context.response_url,
                                                    session=client.session)
        await next()

    if tenancy is not None:  # an installation's tokens revoked, the app uninstalled
        app.middleware(tenancy.lifecycle())
    # Another workspace's request (or one naming none) is refused here, once for every
    # listener: nothing it asks for is done (bot/slack/gate.py).
    app.middleware(only_installation(services.people, services.audit, inflight, client))
    if tenancy is not None:  # what it names is its installation's, from now on
        app.middleware(tenancy.middleware())
    # A repeated delivery (Slack's retry of an event, a proxy's of a command) is acked and
    # dropped here, once for every listener; after request_context, so its line has the id.
    app.middleware(once(services.deliveries, inflight))

    commands.register(app, services, dm_channel)
    actions.register(app, services)
    views.register(app, services)
    home.register(app, services)
    if signals is not None:
        signals.register(app, oauth=tenancy is not None)
    app.error(errors.on_error)
    inflight.install(app)
    return app


def http_app(bolt: AsyncApp, *, signing_secrets: Sequence[str],
             oauth: AsyncOAuthFlow | None = None) -> web.Application:
    """The aiohttp application Slack's HTTP mode talks to. A request signed with any of
    `signing_secrets` is Slack's: the current one, and during a rotation the previous one.
    With `oauth`, the install page and Slack's redirect back too (bot/slack/oauth.py)."""
    refused = {"error": "invalid request"}

    async def events(request: web.Request) -> web.Response:
        raw = await request.read()
        # Verify before parsing: a forged body never reaches a parser (Bolt checks again).
        # Anything wrong before authentication — a 400-digit timestamp included — is a 401.
        if not any(inbound.verified(raw, request.headers, secret=secret)
                   for secret in signing_secrets):
            log.info("refused a Slack request that is unsigned, forged or stale (401)")
            return web.json_response(refused, status=401)
        try:
            body = inbound.parsed(raw, request.content_type)
        except inbound.Malformed as problem:
            log.warning("refused a signed Slack request: %s", problem)
            return web.json_response({"error": "malformed request", "detail": str(problem)},
                                     status=400)
        try:
            bolt_request = inbound.bolt_request(raw, body, query=request.query_string,
                                                headers=dict(request.headers))
            response = await bolt.async_dispatch(bolt_request)
        except Exception:
            # Signed and shaped like Slack's, yet Bolt couldn't take it: still the sender's.
            log.warning("a signed Slack request Bolt could not dispatch", exc_info=True)
            return web.json_response({"error": "malformed request"}, status=400)
        # Let the listener task Bolt just scheduled start (and register as in flight) before
        # Slack gets its answer: a yield, not a wait.
        await asyncio.sleep(0)
        return await to_aiohttp_response(response)

    web_app = web.Application(client_max_size=MAX_BODY)
    web_app.router.add_post(EVENTS_PATH, events)
    if oauth is not None:
        oauth_routes(web_app, oauth)
    return web_app
