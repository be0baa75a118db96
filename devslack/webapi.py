"""`FakeSlack`: Slack's Web API and response_urls, served on 127.0.0.1 by aiohttp.

    async with FakeSlack() as slack:
        client = AsyncWebClient(token=slack.bot_token, base_url=slack.api_url)
        ...
        assert slack.violations == []

Every request is recorded in `slack.calls` and pushed to subscribers (the terminal REPL), the
workspace it builds up is queryable (`messages`, `thread`, `ephemerals`, `dms`, `last_view`,
`home`, `find_buttons`), and failures can be injected with `fail_next`.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any

from aiohttp import web

from bot.clock import Clock, SystemClock
from devslack import replies
from devslack.faults import ANSWERS, Fault, Faults, Garbled, garbled
from devslack.files import FileUploads
from devslack.limits import RateLimits
from devslack.methods import METHODS, MethodStore
from devslack.models import (
    DEFAULT_CHANNELS,
    DEFAULT_USERS,
    ApiCall,
    Message,
    ResponseTarget,
    SlackError,
    SlackUser,
)
from devslack.oauth import AUTHORIZE_PATH, OAuthServer
from devslack.socketmode import SocketModeServer
from devslack.wire import bearer, error_body, read_args

# How long a response_url POST waits for its slash command's ack to be applied. A bot that
# acked first has sent the ack already, but the two replies race over separate connections;
# a bot that calls respond() before ack() must not be stalled until its own ack is late.
ACK_GRACE = 0.25


class MonotonicClock:
    """Wall time read once, then advanced by `time.monotonic()`: it never jumps backwards."""

    def __init__(self) -> None:
        self._anchor = SystemClock().now()
        self._started = time.monotonic()

    def now(self) -> datetime:
        return self._anchor + timedelta(seconds=time.monotonic() - self._started)


Subscriber = Callable[[ApiCall], object]


class FakeSlack(MethodStore):
    """A fake Slack Web API with a recorded, queryable workspace behind it."""

    def __init__(
        self,
        *,
        bot_token: str = "xoxb-devslack",
        app_token: str = "xapp-1-devslack",
        team_id: str = "T0001",
        team_domain: str = "devslack",
        bot_user_id: str = "UBOT",
        bot_id: str = "B0001",
        app_id: str = "A0001",
        bot_name: str = "devslack-bot",
        users: Iterable[SlackUser] = DEFAULT_USERS,
        channels: Mapping[str, str] = DEFAULT_CHANNELS,
        usergroups: Mapping[str, Sequence[str]] | None = None,
        clock: Clock | None = None,
        rate_limits: str = "",  # Slack's limits, enforced: devslack/limits.py
    ) -> None:
        super().__init__(
            clock=clock or MonotonicClock(),
            team_id=team_id,
            team_domain=team_domain,
            bot_name=bot_name,
            bot_user_id=bot_user_id,
            bot_id=bot_id,
            app_id=app_id,
            users=users,
            channels=channels,
        )
        self.bot_token = bot_token
        self.app_token = app_token  # app-level: only apps.connections.open takes it
        self.socket = SocketModeServer(app_id=app_id)
        self.usergroups = {group: list(members) for group, members in (usergroups or {}).items()}
        self.calls: list[ApiCall] = []
        self._subscribers: list[Subscriber] = []
        self._faults = Faults()
        self._cooldown: dict[str, datetime] = {}
        self.limits = RateLimits(rate_limits)
        self._runner: web.AppRunner | None = None
        self._base_url: str | None = None
        self._in_flight = 0
        self._last_activity = float("-inf")
        self._activity = asyncio.Event()
        self._pending_acks: dict[str, asyncio.Event] = {}
        self.uploads = FileUploads()  # files_upload_v2: devslack/files.py
        self._released = asyncio.Event()  # set on stop: "hang" faults answer then
        # Slack's answer to every call with the bot token while set: "invalid_auth",
        # "account_inactive", "token_revoked" (the token is no good, not its targets).
        self.token_refused: str | None = None
        self.oauth = OAuthServer(clock=self.clock, team_id=team_id, app_id=app_id,
                                 bot_user_id=bot_user_id)  # installs: devslack/oauth.py

    # -- lifecycle ---------------------------------------------------------------------------

    async def __aenter__(self) -> FakeSlack:
        await self.start()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.stop()

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> None:
        """Serve on `host:port` (port 0: the OS picks a free one)."""
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._serve_api)
        app.router.add_post("/response/{response_id}", self._serve_response_url)
        app.router.add_post("/upload/{file_id}", self.uploads.receive)
        app.router.add_get(AUTHORIZE_PATH, self.oauth.authorize)
        self.socket.add_routes(app)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, host, port).start()
        bound_host, bound_port = self._runner.addresses[0][:2]
        self._base_url = self.uploads.base_url = f"http://{bound_host}:{bound_port}"

    async def stop(self) -> None:
        self._released.set()
        if self._runner is not None:
            await self.socket.close()
            await self._runner.cleanup()
            self._runner = None

    @property
    def base_url(self) -> str:
        if self._base_url is None:
            raise RuntimeError("FakeSlack is not running: use `async with FakeSlack() as slack`")
        return self._base_url

    @property
    def api_url(self) -> str:
        """What `AsyncWebClient(base_url=...)` takes."""
        return f"{self.base_url}/api/"

    def response_url(self, response_id: str) -> str:
        return f"{self.base_url}/response/{response_id}"

    # -- what SlackRequests needs to build real payloads --------------------------------------

    def issue_response_url(
        self,
        *,
        channel_id: str,
        user_id: str,
        message_ts: str | None = None,
        awaits_ack: bool = False,
    ) -> str:
        """A response_url for a payload from `user_id` in `channel_id` (about `message_ts`).

        With `awaits_ack`, POSTs to it wait (briefly) until `apply_command_ack` has run, so an
        ack sent before `respond()` is shown before the reply, as in Slack.
        """
        target = ResponseTarget(
            channel_id=channel_id, user_id=user_id, issued=self.clock.now(), message_ts=message_ts
        )
        response_id = self.new_response_target(target)
        if awaits_ack:
            self._pending_acks[response_id] = asyncio.Event()
        return self.response_url(response_id)

    def response_id(self, url: str) -> str:
        return url.rsplit("/", 1)[-1]

    def apply_command_ack(self, response_url: str, body: Any) -> ApiCall | None:
        """Show a slash command's ack body (None: no usable ack) to its invoker, as Slack does."""
        response_id = self.response_id(response_url)
        try:
            if body in ("", None):
                return None
            return self._apply("ack", body, lambda: replies.command_ack(self, response_id, body))
        finally:
            pending = self._pending_acks.pop(response_id, None)
            if pending is not None:
                pending.set()

    def apply_view_ack(self, view_id: str, body: Any) -> ApiCall:
        """Apply a view_submission's ack (close, errors, update, push, clear) to the modal stack."""
        return self._apply("ack", body, lambda: replies.view_ack(self, view_id, body))

    def close_view(self, view_id: str) -> None:
        """The user dismissed a modal (Cancel or ×)."""
        self.close_modal(view_id, everything=bool(self.view(view_id).get("clear_on_close")))

    def _apply(self, method: str, body: Any, change: Callable[[], replies.Outcome]) -> ApiCall:
        try:
            response = change().to_response()
        except SlackError as exc:
            response = error_body(exc)
        args = body if isinstance(body, dict) else {} if body in ("", None) else {"text": body}
        return self._record(ApiCall(method, dict(args), None, self.clock.now(), 200, response))

    # -- fault injection ---------------------------------------------------------------------

    def fail_next(
        self,
        method: str,
        error: str = "ratelimited",
        status: int | None = None,
        retry_after: int | None = 1,
        count: int = 1,
        answer: str | None = None,
        applied: bool = False,
    ) -> None:
        """Make the next `count` calls to `method` fail.

        `ratelimited` answers HTTP 429 with `Retry-After: retry_after` and then keeps refusing
        the method until `retry_after` seconds have passed on FakeSlack's clock; any other error
        answers HTTP `status` (default 200) with `{"ok": false, "error": error}`. `answer`
        ("cut", "html", "plain", "empty", "hang": devslack/faults.py) answers what isn't Slack's
        JSON instead, after the call took effect when `applied`.
        """
        if answer is not None:
            if answer not in ANSWERS:
                raise ValueError(f"answer {answer!r}: one of {', '.join(ANSWERS)}")
            default = 502 if answer == "html" else 200
            self._faults.add(method, Fault("", status or default, None, count, answer, applied))
            return
        resolved = status if status is not None else (429 if error == "ratelimited" else 200)
        wait = retry_after if resolved == 429 else None
        self._faults.add(method, Fault(error, resolved, wait, count))

    def clear_faults(self, method: str | None = None) -> None:
        """`method` (or every method) answers normally again: its queued failures are dropped."""
        self._faults.clear(method)

    # -- subscriptions and settling ----------------------------------------------------------

    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call `callback(call)` for every call from now on; returns the unsubscribe function."""
        self._subscribers.append(callback)
        return lambda: self._subscribers.remove(callback)

    def calls_to(self, method: str) -> list[ApiCall]:
        return [c for c in self.calls if c.method == method]

    async def settle(self, *, quiet: float = 0.05, give_up_after: float = 10.0) -> None:
        """Wait until no request has been in flight for `quiet` seconds of real time.

        A bot keeps working after its ack; this is how a script (or the REPL reading a pipe)
        knows the follow-up posts have landed before it reads the workspace.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + give_up_after
        while True:
            now = loop.time()
            if now > deadline:
                raise TimeoutError(f"FakeSlack still busy after {give_up_after} s")
            if self._in_flight == 0 and now - self._last_activity >= quiet:
                return
            self._activity.clear()
            wait = deadline - now if self._in_flight else self._last_activity + quiet - now
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._activity.wait(), max(0.0, wait))

    @contextlib.contextmanager
    def activity(self) -> Iterator[None]:
        """Count something as in flight for `settle`: a request here, or one to the bot."""
        self._busy(+1)
        try:
            yield
        finally:
            self._busy(-1)

    def _busy(self, delta: int) -> None:
        self._in_flight += delta
        self._last_activity = asyncio.get_running_loop().time()
        self._activity.set()

    def deliver_scheduled(self) -> list[Message]:
        """Post scheduled messages that are due; runs before every Web API call too."""
        posted = super().deliver_scheduled()
        for message in posted:
            response = {"ok": True, "channel": message.channel, "ts": message.ts}
            self._record(ApiCall("scheduled_message", {}, None, self.clock.now(), 200, response))
        return posted

    def _record(self, call: ApiCall) -> ApiCall:
        self.calls.append(call)
        for callback in list(self._subscribers):
            callback(call)
        return call

    # -- HTTP --------------------------------------------------------------------------------

    async def _serve_api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        with self.activity():
            args: dict[str, Any] = {}
            headers: dict[str, str] = {}
            token = bearer(request)
            try:
                args = await read_args(request)
            except ValueError:
                status, body = 200, {"ok": False, "error": "invalid_json"}
            else:
                form_token = args.pop("token", None)  # older clients send it as an argument
                token = token or (str(form_token) if form_token else None)
                try:
                    status, headers, body = (
                        self._oauth_access(args, request.headers.get("Authorization"))
                        if method == "oauth.v2.access" else self._answer(method, args, token))
                except Garbled as lost:  # recorded as applied; answered as the fault says
                    self._record(ApiCall(method, args, token, self.clock.now(),
                                         lost.fault.status, lost.body))
                    return await garbled(lost.fault, lost.body, self._released)
            self._record(ApiCall(method, args, token, self.clock.now(), status, body))
            return web.json_response(body, status=status, headers=headers)

    def _answer(
        self, method: str, args: dict[str, Any], token: str | None
    ) -> tuple[int, dict[str, str], dict[str, Any]]:
        if not token:
            return 200, {}, {"ok": False, "error": "not_authed"}
        if (token == self.app_token) != (method == "apps.connections.open"):
            # an app-level token opens Socket Mode connections and nothing else, and only it
            known = token in (self.app_token, self.bot_token)
            return 200, {}, {"ok": False,
                             "error": "not_allowed_token_type" if known else "invalid_auth"}
        if method == "apps.connections.open":
            return 200, {}, {"ok": True, "url": self.socket.issue_url(self.base_url)}
        if token != self.bot_token and (why := self.oauth.refusal(token)):  # devslack/oauth.py
            return 200, {}, {"ok": False, "error": why}
        if token == self.bot_token and self.token_refused:  # revoked, deactivated, broken
            return 200, {}, {"ok": False, "error": self.token_refused}
        now = self.clock.now()
        until = self._cooldown.get(method)  # a fault's Retry-After, else Slack's own limits
        wait = (math.ceil((until - now).total_seconds()) if until is not None and now < until
                else self.limits.check(method, args.get("channel")))
        if wait is not None:
            return 429, {"Retry-After": str(wait)}, {"ok": False, "error": "ratelimited"}
        fault = self._faults.take(method)
        if fault is not None and fault.answer is not None:  # an answer that isn't Slack's JSON
            applied = self._apply_method(method, args, token)[2] if fault.applied else {}
            raise Garbled(fault, applied)
        if fault is not None:
            fault_headers: dict[str, str] = {}
            if fault.retry_after is not None:
                fault_headers["Retry-After"] = str(fault.retry_after)
                self._cooldown[method] = now + timedelta(seconds=fault.retry_after)
            return fault.status, fault_headers, {"ok": False, "error": fault.error}
        return self._apply_method(method, args, token)

    def _apply_method(self, method: str, args: dict[str, Any], token: str
                      ) -> tuple[int, dict[str, str], dict[str, Any]]:
        refused = self.unreachable(method, args)
        if refused is not None:
            return 200, {}, {"ok": False, "error": refused}
        self.deliver_scheduled()
        if method == "auth.teams.list":  # whose the token is: devslack/oauth.py
            return 200, {}, {"ok": True, **self.oauth.teams_list(token, args)}
        handler = METHODS.get(method) or self.uploads.methods().get(method)
        if handler is None:
            return 200, {}, {"ok": False, "error": "unknown_method"}
        try:
            home = self.team_id  # the workspace answering is the token's (views, users)
            # an org-wide token's view opens in the workspace its trigger came from
            self.team_id = (self.oauth.team_of(token) or self.trigger_team(args.get("trigger_id"))
                            or home)
            try:
                answer = handler(self, args)
            finally:
                self.team_id = home
            return 200, {}, {"ok": True, **self.oauth.auth_test(method, token, answer)}
        except SlackError as exc:
            return 200, {}, error_body(exc)

    def _oauth_access(self, args: dict[str, Any], authorization: str | None
                      ) -> tuple[int, dict[str, str], dict[str, Any]]:
        try:
            return 200, {}, {"ok": True, **self.oauth.access(args, authorization)}
        except SlackError as exc:
            return 200, {}, error_body(exc)

    async def _serve_response_url(self, request: web.Request) -> web.Response:
        response_id = request.match_info["response_id"]
        with self.activity():
            pending = self._pending_acks.get(response_id)
            if pending is not None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(pending.wait(), ACK_GRACE)
            try:
                body: Any = await request.json()
            except ValueError:
                body = (await request.text())[:2000]
            try:
                status, response = 200, replies.respond(self, response_id, body).to_response()
            except SlackError as exc:
                status = 404 if exc.code in ("invalid_url", "expired_url", "used_url") else 400
                response = error_body(exc)
            args = body if isinstance(body, dict) else {"raw": body}
            call = ApiCall("response_url", dict(args), None, self.clock.now(), status, response)
            self._record(call)
            return web.json_response(response, status=status)
