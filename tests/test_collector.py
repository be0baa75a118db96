"""`cluster-bot serve`'s garbage collector (bot/app/collector.py): no automatic full collection;
one that is due waits for a lull in Slack's requests, or at most MAX_WAIT_SECONDS. On an
injected clock, count and collect; the loop's ticks on a loop that only records them."""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

from slack_bolt.authorization import AuthorizeResult
from slack_bolt.request.async_request import AsyncBoltRequest

from bot.app import collector as module
from bot.app.collector import FULL_AFTER, MAX_WAIT_SECONDS, QUIET_SECONDS, Collector
from bot.slack.app import AckingApp


class World:
    """The collector's surroundings: a clock, CPython's counts, whether Slack is quiet."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.counts = (0, 0, 0)
        self.busy = False
        self.collected: list[int] = []
        self.asked: list[float] = []

    def quiet(self, now: float, for_seconds: float) -> bool:
        self.asked.append(for_seconds)
        return not self.busy

    def collect(self, generation: int) -> int:
        self.collected.append(generation)
        self.counts = (0, 0, 0)
        return 7

    def collector(self) -> Collector:
        return Collector(self.quiet, clock=lambda: self.now, collect=self.collect,
                         count=lambda: self.counts)


def test_a_full_collection_is_made_only_once_due_and_in_a_lull() -> None:
    w = World()
    c = w.collector()
    w.counts = (5, 3, FULL_AFTER - 1)  # not due yet: quiet or not, nothing
    assert not c.check() and w.collected == []
    w.counts, w.busy = (5, 3, FULL_AFTER), True
    for _ in range(50):  # due, but requests are coming in
        w.now += 0.1
        assert not c.check()
    assert w.collected == []
    w.busy = False
    assert c.check()
    assert w.collected == [2] and (c.in_lulls, c.at_bound) == (1, 0)
    assert set(w.asked) == {QUIET_SECONDS}
    assert not c.check()  # done: not due again until FULL_AFTER more


def test_a_busy_process_collects_at_the_latest_max_wait_after_it_became_due() -> None:
    w = World()
    c = w.collector()
    w.busy = True
    w.counts = (0, 0, FULL_AFTER + 3)
    assert not c.check()  # due from now
    w.now += MAX_WAIT_SECONDS - 0.1
    assert not c.check()
    w.now += 0.1
    assert c.check() and w.collected == [2] and (c.in_lulls, c.at_bound) == (0, 1)
    w.counts = (0, 0, FULL_AFTER)  # due again: the wait starts anew
    w.now += 1
    assert not c.check()
    w.now += MAX_WAIT_SECONDS
    assert c.check() and c.at_bound == 2


class Handle:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class RecordingLoop:
    """Records `call_later`; the test runs the last callback scheduled when it likes."""

    def __init__(self) -> None:
        self.later: list[tuple[float, Callable[[], Any], Handle]] = []

    def call_later(self, delay: float, callback: Callable[[], Any]) -> Handle:
        self.later.append((delay, callback, Handle()))
        return self.later[-1][2]

    def run_next(self) -> None:
        self.later[-1][1]()


def test_serving_sets_the_thresholds_and_checks_on_the_loop() -> None:
    w = World()
    c = w.collector()
    loop = RecordingLoop()
    before = gc.get_threshold()
    try:
        with c.serving(loop):  # type: ignore[arg-type]
            assert gc.isenabled()
            assert gc.get_threshold() == (*before[:2], module.NEVER)  # the young ones: CPython's
            assert module.NEVER == 2**31 - 1  # the largest a threshold can be (a C int)
            assert [d for d, _, _ in loop.later] == [module.CHECK_SECONDS]
            w.counts = (0, 0, FULL_AFTER)
            loop.run_next()
            assert w.collected == [2]
            assert len(loop.later) == 2  # and the next check is on the loop
            loop.run_next()
            assert w.collected == [2]
        assert loop.later[-1][2].cancelled
        assert gc.get_threshold() == before
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


async def test_the_app_says_quiet_only_with_no_ack_pending_and_none_for_a_while() -> None:
    async def authorize(**_: Any) -> AuthorizeResult:
        return AuthorizeResult(enterprise_id=None, team_id="T1", bot_token="xoxb-test",
                               bot_user_id="UBOT", bot_id="B1")

    app = AckingApp(name="cluster-bot", signing_secret="secret", authorize=authorize,
                    request_verification_enabled=False)
    seen: list[tuple[int, bool]] = []

    @app.command("/cluster")
    async def command(ack: Any) -> None:
        seen.append((app.acking, app.quiet(app.last_request + 60, 1.0)))
        await ack()

    assert app.quiet(0.0, 1.0)  # nothing ever came
    body = ("command=%2Fcluster&text=list&team_id=T1&user_id=U1&channel_id=C1"
            "&response_url=http%3A%2F%2F127.0.0.1%3A9%2Fr&trigger_id=t")
    response = await app.async_dispatch(AsyncBoltRequest(body=body))
    assert response.status == 200
    assert seen == [(1, False)]  # while it waited for its ack: not quiet, however long since
    assert app.acking == 0
    assert not app.quiet(app.last_request + 0.5, 1.0)
    assert app.quiet(app.last_request + 1.0, 1.0)
