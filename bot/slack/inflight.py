"""Listener work still running after its ack, counted so it can be awaited.

With `process_before_response=False` Bolt acks, answers Slack, and finishes the listener in a
background task. Shutdown waits for those tasks (no half-done work when the process stops), and
tests wait for them instead of sleeping. Installed as Bolt's listener start/completion handlers,
which bracket the listener *and* its error handler.
"""

from __future__ import annotations

import asyncio

from slack_bolt.async_app import AsyncApp
from slack_bolt.listener.async_listener_completion_handler import AsyncListenerCompletionHandler
from slack_bolt.listener.async_listener_start_handler import AsyncListenerStartHandler
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse


class InFlight:
    def __init__(self) -> None:
        self.count = 0
        self._idle = asyncio.Event()
        self._idle.set()

    def started(self) -> None:
        self.count += 1
        self._idle.clear()

    def finished(self) -> None:
        self.count -= 1
        if self.count == 0:
            self._idle.set()

    async def idle(self) -> None:
        await self._idle.wait()

    def install(self, app: AsyncApp) -> None:
        runner = app.listener_runner
        runner.listener_start_handler = _Start(self)
        runner.listener_completion_handler = _Done(self)


class _Start(AsyncListenerStartHandler):
    def __init__(self, inflight: InFlight) -> None:
        self._inflight = inflight

    async def handle(self, request: AsyncBoltRequest, response: BoltResponse | None) -> None:
        self._inflight.started()


class _Done(AsyncListenerCompletionHandler):
    def __init__(self, inflight: InFlight) -> None:
        self._inflight = inflight

    async def handle(self, request: AsyncBoltRequest, response: BoltResponse | None) -> None:
        self._inflight.finished()
