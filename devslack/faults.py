"""Injected Web API failures (`FakeSlack.fail_next`): per method, a queue of faults, each
answering its next `remaining` calls.

Besides Slack's own `{"ok": false}` errors, a fault can answer what isn't Slack's JSON, as
proxies and Slack incidents do (`answer`): "cut" (the JSON cut in half), "html" (an HTML error
page, status 502 unless given), "plain" (text/plain), "empty" (no body), or "hang" (nothing:
the connection stays open until the client gives up). With `applied` the call takes effect
first — a post is made — and only its answer is lost.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from aiohttp import web

ANSWERS = ("cut", "html", "plain", "empty", "hang")


@dataclass
class Fault:
    error: str
    status: int
    retry_after: int | None  # a 429's Retry-After (seconds)
    remaining: int
    answer: str | None = None  # one of ANSWERS: an answer that isn't Slack's JSON
    applied: bool = False  # with `answer`: the call takes effect before its answer is lost


class Garbled(Exception):  # noqa: N818 - a control-flow signal, raised and caught in webapi.py
    """The answer to send instead of Slack's JSON (`body`: what Slack would have said)."""

    def __init__(self, fault: Fault, body: dict[str, Any]) -> None:
        super().__init__(fault.answer)
        self.fault = fault
        self.body = body


async def garbled(fault: Fault, body: dict[str, Any], released: asyncio.Event) -> web.Response:
    """The answer `fault` sends in place of `body`."""
    text = json.dumps(body)
    if fault.answer == "hang":
        await released.wait()  # until the fake stops: the client has given up by then
        return web.Response(status=fault.status, text=text, content_type="application/json")
    if fault.answer == "cut":
        return web.Response(status=fault.status, text=text[: len(text) // 2],
                            content_type="application/json")
    if fault.answer == "html":
        return web.Response(status=fault.status, content_type="text/html",
                            text=f"<html><body><h1>{fault.status} Bad Gateway</h1></body></html>")
    if fault.answer == "plain":
        return web.Response(status=fault.status, text="upstream connect error",
                            content_type="text/plain")
    return web.Response(status=fault.status, body=b"", content_type="application/json")


class Faults:
    def __init__(self) -> None:
        self._queued: dict[str, list[Fault]] = {}

    def add(self, method: str, fault: Fault) -> None:
        self._queued.setdefault(method, []).append(fault)

    def clear(self, method: str | None = None) -> None:
        if method is None:
            self._queued.clear()
        else:
            self._queued.pop(method, None)

    def take(self, method: str) -> Fault | None:
        """The fault answering this call to `method`, if one is queued."""
        queue = self._queued.get(method) or []
        if not queue:
            return None
        fault = queue[0]
        fault.remaining -= 1
        if fault.remaining <= 0:
            queue.pop(0)
        return fault
