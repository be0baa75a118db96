"""The local workspace in a browser: a page on 127.0.0.1 that looks and works like Slack.

    async with BrowserWorkspace(workspace, lines={"sim": simulation.run},
                                controls=CONTROLS) as browser:
        print(browser.url)  # http://127.0.0.1:<port>/?token=…

The page (static/workspace.html, .js, .css: no build step) shows what one person sees — pick
who with its person switcher — and drives the bot exactly as the terminal does: a slash command
typed into its composer, a button pressed, a modal submitted become the same signed requests
(`SlackRequests`, the workspace's own client) to the same bot, whose Web API calls land in the
same FakeSlack. It follows FakeSlack live: every call recorded bumps a version, pushed to the
page over server-sent events, and the page fetches what changed.

Lines that are not slash commands go to `lines` by their first word (`sim …`): the answer is a
note only the typist sees. Every /api request carries the token printed in the URL: another
page open in the same browser can't drive the workspace or read its DMs.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import importlib.resources
import mimetypes
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import Any

from aiohttp import web

from devslack.models import Message, SlackError, SlackUser
from devslack.page import DM, HOME, Note, Page, ReadMarks
from devslack.reply import Reply
from devslack.workspace import LocalWorkspace

Say = Callable[[str], None]
Lines = Mapping[str, Callable[[str, Say], Awaitable[str]]]  # first word → run the line
STATIC = {"workspace.js": "text/javascript", "workspace.css": "text/css"}
KEEPALIVE_SECONDS = 15.0
COALESCE_SECONDS = 0.25  # a burst of calls (a poll's edits) is one push


class BrowserWorkspace:
    """The page's HTTP server over a `LocalWorkspace` (its FakeSlack and signed client)."""

    def __init__(self, workspace: LocalWorkspace, *, lines: Lines | None = None,
                 controls: Sequence[tuple[str, str]] = (),
                 status: Callable[[], str] = lambda: "",
                 help_text: str = "", host: str = "127.0.0.1", port: int = 0) -> None:
        self.ws = workspace
        self.slack = workspace.slack
        self.lines = dict(lines or {})
        self.controls = list(controls)
        self.status = status
        self.help_text = help_text
        self.token = secrets.token_urlsafe(16)
        self.notes: list[Note] = []
        self.marks = ReadMarks()
        self.version = 0
        self.running: list[str] = []  # lines still running (a long `sim advance`)
        self._host, self._port = host, port
        self._runner: web.AppRunner | None = None
        self._url: str | None = None
        self._tick: asyncio.Future[None] | None = None
        self._closing = False
        self._unsubscribe: Callable[[], None] | None = None

    @property
    def url(self) -> str:
        if self._url is None:
            raise RuntimeError("not serving: use `async with BrowserWorkspace(…)`")
        return self._url

    async def __aenter__(self) -> BrowserWorkspace:
        app = web.Application(middlewares=[self._guard])
        app.router.add_get("/", self._index)
        app.router.add_get("/static/{name}", self._static)
        app.router.add_get("/api/state", self._state)
        app.router.add_get("/api/events", self._events)
        app.router.add_get("/api/files/{file_id}", self._file)
        for name, handler in (("command", self._command), ("click", self._click),
                              ("submit", self._submit), ("close", self._close),
                              ("home", self._home)):
            app.router.add_post(f"/api/{name}", handler)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        await web.TCPSite(self._runner, self._host, self._port).start()
        host, port = self._runner.addresses[0][:2]
        self._url = f"http://{host}:{port}/?token={self.token}"
        self._unsubscribe = self.slack.subscribe(lambda _call: self.changed())
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
        self._closing = True
        self.changed()  # wake the event streams: they end
        if self._runner is not None:
            await self._runner.cleanup()

    def changed(self) -> None:
        """Something anyone may see changed: push a new version to every open page."""
        self.version += 1
        if self._tick is not None and not self._tick.done():
            self._tick.set_result(None)
        self._tick = None

    def note(self, user: SlackUser, place: str, text: str) -> None:
        """Show `text` to `user` in `place`, from the workspace itself."""
        self.notes.append(Note(user.id, place, self.slack.next_ts(), text))
        self.changed()

    # -- pages and state ---------------------------------------------------------------------

    @web.middleware
    async def _guard(self, request: web.Request,
                     handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                     ) -> web.StreamResponse:
        if request.path.startswith("/api/"):
            given = request.headers.get("X-Devslack-Token") or request.query.get("token", "")
            if not hmac.compare_digest(given.encode(), self.token.encode()):
                return web.json_response({"error": "the token from the printed URL"}, status=403)
        try:
            return await handler(request)
        except (KeyError, ValueError, TypeError, LookupError, SlackError) as exc:
            return web.json_response({"error": f"bad request: {exc}"}, status=400)

    async def _index(self, request: web.Request) -> web.Response:
        return web.Response(body=_static_file("workspace.html"), content_type="text/html")

    async def _static(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in STATIC:
            raise web.HTTPNotFound()
        return web.Response(body=_static_file(name), content_type=STATIC[name])

    async def _state(self, request: web.Request) -> web.Response:
        user = self._person(request.query.get("user", ""))
        place = request.query.get("place") or next(iter(self.slack.channels))
        page = Page(self.slack, user=user, notes=self.notes, marks=self.marks,
                    file_url=self._file_url)
        body = page.fragments(place, request.query.get("thread") or None)
        body.update(
            version=self.version, me=user.id,
            people=[{"id": u.id, "name": u.name, "real_name": u.real_name,
                     "approver": approver} for u, approver in self.ws.people()],
            controls=[{"label": label, "line": line} for label, line in self.controls],
            status=self.status(), running=self.running,
        )
        return web.json_response(body)

    async def _events(self, request: web.Request) -> web.StreamResponse:
        """Server-sent events: the version, whenever it changes (and a comment now and then,
        so a proxy or the browser keeps the stream open)."""
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                               "Cache-Control": "no-cache"})
        await response.prepare(request)
        sent = -1
        with contextlib.suppress(ConnectionResetError):  # the tab was closed
            while not self._closing:
                if sent != self.version:
                    sent = self.version
                    await response.write(f"data: {sent}\n\n".encode())
                    await asyncio.sleep(COALESCE_SECONDS)
                    continue
                if self._tick is None:
                    self._tick = asyncio.get_running_loop().create_future()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(self._tick), KEEPALIVE_SECONDS)
                if sent == self.version:
                    await response.write(b": keepalive\n\n")
        return response

    async def _file(self, request: web.Request) -> web.Response:
        file_id = request.match_info["file_id"]
        found = next((f for f in self.slack.uploads.uploaded if f.id == file_id), None)
        if found is None or found.data is None:
            raise web.HTTPNotFound()
        kind = mimetypes.guess_type(found.filename)[0] or "application/octet-stream"
        return web.Response(body=found.data, content_type=kind)

    def _file_url(self, file_id: str) -> str:
        return f"/api/files/{file_id}?token={self.token}"

    def _person(self, ref: str) -> SlackUser:
        return self.slack.user(ref) if ref else self.ws.user

    # -- what a person does ------------------------------------------------------------------

    async def _command(self, request: web.Request) -> web.Response:
        """The composer: a slash command, a line for `lines` (`sim …`), or `help`."""
        body = await request.json()
        user = self._person(str(body["user"]))
        place = self._channel(str(body.get("place") or ""), user)
        text = str(body.get("text") or "").strip()
        word = text.split(" ", 1)[0]
        if text.startswith("/"):
            command, _, rest = text.partition(" ")
            reply = await self.ws.requests.slash(command, rest.strip(), user_id=user.id,
                                                 channel_id=place)
            self._check(reply, user, place)
        elif word in self.lines:
            said: list[str] = []
            self.running.append(text)
            self.changed()
            try:
                answer = await self.lines[word](text, said.append)
            finally:
                self.running.remove(text)
            self.note(user, place, "\n".join([f"› {text}", *said, answer]))
        elif text == "help":
            self.note(user, place, self.help_text or "Type a slash command, e.g. /cluster help")
        elif text:
            self.note(user, place, f"› {text}\n? commands start with / (e.g. /cluster help)"
                      + "".join(f" or {w} …" for w in self.lines) + "; `help` for more")
        return web.json_response({"ok": True})

    async def _click(self, request: web.Request) -> web.Response:
        """A button pressed, an option picked, on a message or a view the person can see."""
        body = await request.json()
        user = self._person(str(body["user"]))
        surface: Message | dict[str, Any]
        if body.get("view"):
            surface = self._open_view(str(body["view"]), user)
        else:
            found = self.slack.find_message(str(body["channel"]), str(body["ts"]))
            if found is None or found.deleted or found.ephemeral_to not in (None, user.id) \
                    or self.slack.dm_user(found.channel) not in (None, user.id):
                return web.json_response({"error": "that message is gone"}, status=409)
            surface = found
        reply = await self.ws.requests.click(
            surface, str(body["action"]), user_id=user.id, block_id=body.get("block"),
            value=body.get("value"), values=body.get("values") or None)
        place = surface.channel if isinstance(surface, Message) else self.ws.slack.dm_channel(
            user.id)
        return web.json_response({"ok": self._check(reply, user, place)})

    async def _submit(self, request: web.Request) -> web.Response:
        """A modal's submit: the bot's ack may send the form back with errors per field."""
        body = await request.json()
        user = self._person(str(body["user"]))
        view = self._open_view(str(body["view"]), user)
        reply = await self.ws.requests.submit_view(view, user_id=user.id,
                                                   values=body.get("values") or {})
        ok = self._check(reply, user, self.slack.dm_channel(user.id))
        content = reply.json if ok else None
        errors = {}
        if isinstance(content, dict) and content.get("response_action") == "errors":
            errors = {str(k): str(v) for k, v in (content.get("errors") or {}).items()}
        return web.json_response({"ok": ok, "errors": errors})

    async def _close(self, request: web.Request) -> web.Response:
        body = await request.json()
        user = self._person(str(body["user"]))
        await self.ws.requests.close_view(self._open_view(str(body["view"]), user),
                                          user_id=user.id)
        self.changed()
        return web.json_response({"ok": True})

    async def _home(self, request: web.Request) -> web.Response:
        """The person opened the app's Home tab: Slack tells the app (app_home_opened)."""
        body = await request.json()
        user = self._person(str(body["user"]))
        self._check(await self.ws.requests.app_home_opened(user.id), user, HOME)
        return web.json_response({"ok": True})

    def _open_view(self, view_id: str, user: SlackUser) -> dict[str, Any]:
        if self.slack.view_owner(view_id) != user.id or not self.slack.is_open(view_id):
            raise LookupError(f"view {view_id} is not open for {user.name}")
        return self.slack.view(view_id)

    def _channel(self, place: str, user: SlackUser) -> str:
        """Where a command typed in `place` runs: the Home tab's composer is the app's DM."""
        if place in ("", HOME, DM):
            return self.slack.dm_channel(user.id)
        if place not in self.slack.channels and self.slack.dm_user(place) != user.id:
            raise LookupError(f"{user.name} can't type in {place}")
        return place

    def _check(self, reply: Reply, user: SlackUser, place: str) -> bool:
        """A bad ack, as Slack would show it (to the person only); True if there was none."""
        if reply.problem is not None:
            self.note(user, place, reply.problem)
        return reply.problem is None


def _static_file(name: str) -> bytes:
    return (importlib.resources.files("devslack") / "static" / name).read_bytes()
