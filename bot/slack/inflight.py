"""Listener work still running after its ack, counted so it can be awaited; and the ack that
lets that work begin only once Slack has its answer.

With `process_before_response=False` Bolt acks, answers Slack, and finishes the listener in a
background task. Shutdown waits for those tasks (no half-done work when the process stops), and
tests wait for them instead of sleeping. Installed as Bolt's listener start/completion handlers,
which bracket the listener *and* its error handler.

Bolt returns a listener's ack to Slack by polling for it every 10 ms while the listener goes on;
what the listener does right after `ack()` (render a page of `/cluster list`: milliseconds of CPU)
would run before that poll and hold up its own answer and every other one due. So a listener's
`ack` (`AckFirst`) returns only once the ack has left Bolt: `AckingApp.async_dispatch`
(bot/slack/app.py) sets the event stored under `ACK_SENT` in the request's context one turn of
the loop after Bolt hands the answer back, once the route has written it.

And only WORK_AT_ONCE listeners' work after their acks runs at once (`WorkSlots`); the rest
waits its turn without taking the event loop. Acks are ~1 ms of CPU, a `/cluster list` page
~10 ms: under a burst that is more work than one core does, and every ready task takes its turn
on the loop, so without a bound the acks — Slack's 3 seconds — queued behind the work.
"""

from __future__ import annotations

import asyncio
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp
from slack_bolt.listener.async_listener_completion_handler import AsyncListenerCompletionHandler
from slack_bolt.listener.async_listener_start_handler import AsyncListenerStartHandler
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse

from bot.slack.acks_first import after_ack

ACK_SENT = "ack_sent"  # the request context's key for the event set once its ack has left
# The request context's key for the task recording its delivery after the ack (bot/slack/once.py)
RECORDED = "delivery_recorded"
WORK_SLOTS = "work_slots"  # the request context's key for the app's WorkSlots
WORK_AT_ONCE = 16  # listeners working after their acks at once (the DB pool holds 5 + 10)


class WorkSlots(asyncio.Semaphore):
    """How many listeners work after their acks at once (one per app)."""

    def __init__(self, size: int = WORK_AT_ONCE) -> None:
        super().__init__(size)


class AckFirst(AsyncAck):
    """A listener's `ack`: acks, then waits until the answer is on its way to Slack, the
    delivery is recorded (`recorded`: bot/slack/once.py) and a work slot is free (`slots`), so
    the work after it begins then. `release()` (the listener is done) frees the slot."""

    def __init__(self, ack: AsyncAck, sent: asyncio.Event | None,
                 recorded: asyncio.Task[None] | None = None,
                 slots: WorkSlots | None = None) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self._ack = ack
        self._sent = sent
        self._recorded = recorded
        self._slots = slots
        self._holding = False

    async def __call__(self, *args: Any, **kwargs: Any) -> BoltResponse:
        return await self._acked(await self._ack(*args, **kwargs))

    async def answer(self, body: str) -> BoltResponse:
        """Ack with a JSON answer serialised beforehand (what Bolt's `ack(**message)` would
        serialise on every call: the help, ~10 KB, takes ~0.3 ms)."""
        self._ack.response = BoltResponse(status=200, body=body)
        return await self._acked(self._ack.response)

    async def _acked(self, response: BoltResponse) -> BoltResponse:
        self.response = response
        after_ack()  # from here on this task's turns come behind the acks (bot/slack/acks_first.py)
        if self._sent is not None:
            await self._sent.wait()
        if self._recorded is not None:
            await asyncio.wait({self._recorded})  # never raises; not cancelled with us
        if self._slots is not None and not self._holding:
            await self._slots.acquire()
            self._holding = True
        return self.response

    def release(self) -> None:
        if self._holding and self._slots is not None:
            self._holding = False
            self._slots.release()


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
