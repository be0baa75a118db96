"""Acks first on the event loop (bot/slack/acks_first.py): the work after an ack takes at most a
slice of each turn of the loop, behind everything else; while the loop is busy it waits up to
HOLD_AT_MOST, then still always gets a slice every PASS_TURNS + 1 turns.

The work is CPU-heavy on an injected clock (each step "costs" STEP seconds, a request's turn
TURN); what is counted is steps and turns of the loop, never time.
"""

import asyncio
import contextvars
import socket
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from slack_bolt.async_app import AsyncAck

from bot.slack.acks_first import (
    HOLD_AT_MOST,
    PASS_TURNS,
    WORK_PER_TURN,
    AcksFirstLoop,
    after_ack,
)
from bot.slack.inflight import AckFirst, WorkSlots

STEP = 0.005  # the fake CPU a step of work costs: more than a turn's slice
TURN = 0.001  # the fake CPU of a request's turn (reading its body, its middleware, …)
LISTENERS, STEPS = 16, 40  # WorkSlots' 16 listeners working after their acks, 40 steps each
HELD_TURNS = round(HOLD_AT_MOST / TURN)  # a request's turns the work waits out, at most


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def run(main: Callable[[], Coroutine[Any, Any, Any]], loop: Callable[[], asyncio.AbstractEventLoop]
        ) -> Any:
    with asyncio.Runner(loop_factory=loop) as runner:
        return runner.run(main())


class Burst:
    """LISTENERS tasks, each acked and then working STEPS steps of STEP seconds of CPU."""

    def __init__(self, clock: Clock, *, step: float = STEP) -> None:
        self.clock, self.step, self.steps = clock, step, 0
        self.working = asyncio.Event()  # every listener has acked and taken a step of work

    async def _work(self) -> None:
        await AckFirst(AsyncAck(), None)()  # the listener's ack: what follows is its work
        for _ in range(STEPS):
            self.clock.now += self.step
            self.steps += 1
            if self.steps == LISTENERS:
                self.working.set()
            await asyncio.sleep(0)

    def start(self) -> list[asyncio.Task[None]]:
        return [asyncio.create_task(self._work()) for _ in range(LISTENERS)]


def behind_each_turn(loop: Callable[[Clock], asyncio.AbstractEventLoop], turns: int = 10
                     ) -> list[int]:
    """While a burst works, a request's turns (each one step of its own, as reading its body,
    its middleware, Bolt's poll for the ack and writing the answer are, costing TURN): how many
    steps of the burst's work ran before each."""
    clock = Clock()

    async def main() -> list[int]:
        burst = Burst(clock)
        tasks = burst.start()
        await burst.working.wait()
        behind = []
        for _ in range(turns):
            before = burst.steps
            clock.now += TURN
            await asyncio.sleep(0)  # one turn of the request's
            behind.append(burst.steps - before)
        await asyncio.gather(*tasks)
        assert burst.steps == LISTENERS * STEPS  # all the work was done
        return behind

    return list(run(main, lambda: loop(clock)))


def test_a_request_waiting_for_its_ack_goes_before_the_work():
    # Its turns go first, HOLD_AT_MOST's worth of them without a step of work between.
    assert behind_each_turn(lambda clock: AcksFirstLoop(clock=clock)) == [0] * 10
    # The loop `cluster-bot serve` ran on before: every working listener's step in each turn.
    assert behind_each_turn(lambda _: asyncio.SelectorEventLoop()) == [LISTENERS] * 10


def test_past_its_hold_the_work_takes_a_step_every_pass_turns():
    behind = behind_each_turn(lambda clock: AcksFirstLoop(clock=clock), HELD_TURNS + 50)
    # Nothing while held (the work found the loop busy as the listeners took their first
    # steps, so a turn or two less than HELD_TURNS of the request's), then one step after
    # every PASS_TURNS it let go by.
    assert sum(behind[:HELD_TURNS - 2]) == 0
    past = behind[HELD_TURNS:]
    assert max(past) == 1 and sum(past) == pytest.approx(len(past) / (PASS_TURNS + 1), abs=1)


def test_idle_turns_look_at_the_sockets_before_a_slice_of_work():
    clock = Clock()

    async def main() -> list[str]:
        loop = asyncio.get_running_loop()
        order: list[str] = []
        ours, theirs = socket.socketpair()
        ours.setblocking(False)
        came = asyncio.Event()

        def readable() -> None:
            order.append("request")
            ours.recv(100)
            came.set()
        loop.add_reader(ours.fileno(), readable)

        async def work() -> None:
            after_ack()
            # A request arrives from outside (not work) in the next turn, ahead of the work's
            # next turn — and then nothing else is ready on the loop.
            loop.call_soon(theirs.send, b"POST /slack/events", context=contextvars.Context())
            for _ in range(3):
                order.append("work")
                clock.now += STEP
                await asyncio.sleep(0)

        task = asyncio.create_task(work())
        await came.wait()
        await task
        loop.remove_reader(ours.fileno())
        ours.close()
        theirs.close()
        return order

    # Its bytes, unread when the loop last looked, go before the next slice of work (which
    # would otherwise take that idle-looking turn: 2 ms or a step, whatever it costs).
    assert run(main, lambda: AcksFirstLoop(clock=clock)) == ["work", "request", "work", "work"]


def test_small_steps_share_a_turn_up_to_its_slice():
    clock = Clock()
    small = WORK_PER_TURN / 4

    async def main() -> tuple[int, int]:
        loop = asyncio.get_running_loop()
        assert isinstance(loop, AcksFirstLoop)
        burst = Burst(clock, step=small)
        tasks = burst.start()
        await asyncio.wait(tasks)  # this task waits: the work has the loop to itself
        return loop.work_steps, loop.work_slices

    steps, slices = run(main, lambda: AcksFirstLoop(clock=clock))
    # Four steps of a quarter slice each to a turn (and the tasks' last steps, which cost none).
    assert steps >= LISTENERS * STEPS
    assert slices == pytest.approx(LISTENERS * STEPS / 4, abs=LISTENERS)


def test_the_work_is_never_starved_by_a_steady_stream_of_acks():
    clock = Clock()

    async def main() -> int:
        burst = Burst(clock)
        tasks = burst.start()
        turns = 0
        while not all(t.done() for t in tasks):  # something other than work is always ready
            turns += 1
            clock.now += TURN
            await asyncio.sleep(0)
        return turns

    # Held for HOLD_AT_MOST, then one step of work (each costs more than the slice) after every
    # PASS_TURNS turns.
    assert run(main, lambda: AcksFirstLoop(clock=clock)) <= \
        HELD_TURNS + (PASS_TURNS + 1) * LISTENERS * STEPS


def test_only_what_follows_the_ack_is_held_back():
    clock = Clock()

    async def main() -> tuple[int, int, int]:
        loop = asyncio.get_running_loop()
        assert isinstance(loop, AcksFirstLoop)
        counts = []

        async def listener() -> None:
            ack = AckFirst(AsyncAck(), None, slots=WorkSlots(1))
            for _ in range(3):
                await asyncio.sleep(0)  # before its ack: its turns come with everyone's
            counts.append(loop.work_steps)
            await ack()
            for _ in range(3):
                await asyncio.sleep(0)
            ack.release()
            counts.append(loop.work_steps)

        await asyncio.create_task(listener())
        await asyncio.sleep(0)
        return counts[0], counts[1], loop.work_steps

    before, after, later = run(main, lambda: AcksFirstLoop(clock=clock))
    assert before == 0
    assert after >= 3  # its three turns after the ack were work steps
    assert later == after  # waking the task that awaited it is that task's turn, not work


def test_held_work_can_be_cancelled_and_its_failures_reach_the_loop():
    clock = Clock()
    failures: list[dict[str, Any]] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _, context: failures.append(context))
        started = asyncio.Event()

        async def work() -> None:
            after_ack()
            started.set()
            await asyncio.Event().wait()  # never set: only cancelling ends it

        task = asyncio.create_task(work())
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

        async def failing() -> None:
            after_ack()
            loop.call_soon(lambda: 1 / 0, context=None)  # not work: runs as ever
            handle = loop.call_soon(lambda: failures.append({"ran": True}))  # work: held
            handle.cancel()  # a held step cancelled never runs
            loop.call_soon(lambda: 1 / 0)  # a held step that fails

        await asyncio.create_task(failing())
        for _ in range(3):
            await asyncio.sleep(0)

    run(main, lambda: AcksFirstLoop(clock=clock))
    assert [type(f.get("exception")) for f in failures] == [ZeroDivisionError] * 2
