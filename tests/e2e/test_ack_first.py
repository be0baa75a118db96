"""Work after an ack never holds up the ack: a listener's `ack()` returns only once Bolt has
handed the answer back and the route has written it (bot/slack/inflight.py), so rendering a page
of `/cluster list` can't run in the 10 ms Bolt waits before it answers, nor before the answer
leaves."""

from __future__ import annotations

import inspect

from slack_bolt.adapter.aiohttp import to_aiohttp_response

from bot.slack import app as app_module
from tests.e2e.harness import bot


async def test_the_work_after_an_ack_begins_once_the_ack_has_left(tmp_path, monkeypatch):
    async with bot(tmp_path) as h:
        order: list[str] = []
        dispatch = h.rt.bolt.async_dispatch
        live_page = h.rt.services.clusters.live_page

        async def dispatched(request):  # what bot/slack/app.py's route awaits
            response = await dispatch(request)
            order.append("acked")
            return response

        async def answer(response):  # the route's last step: the HTTP answer for Slack
            order.append("answered")
            return await to_aiohttp_response(response)

        async def page(n: int):
            order.append("work")
            return await live_page(n)

        monkeypatch.setattr(h.rt.bolt, "async_dispatch", dispatched)
        monkeypatch.setattr(app_module, "to_aiohttp_response", answer)
        monkeypatch.setattr(h.rt.bolt, "on_ack", lambda kind, seconds: order.append(kind))
        monkeypatch.setattr(h.rt.services.clusters, "live_page", page)
        await h.slash("list")
        await h.slash("list 2")
        # The ack is timed when Bolt hands it back (a middleware would time nothing: Bolt runs
        # them before the listener), and only then does the listener's work begin.
        assert order == ["slash_command", "acked", "answered", "work"] * 2


async def test_the_app_is_built_without_walking_the_stack(tmp_path, monkeypatch):
    """Bolt names an unnamed app after its caller's file through inspect.stack(), which reads
    the source of every frame on the stack: ~0.1 s for every app (every start, every test)."""
    walked: list[int] = []

    def stack(*args, **kwargs):
        walked.append(1)
        return real_stack(*args, **kwargs)

    real_stack = inspect.stack
    monkeypatch.setattr(inspect, "stack", stack)
    async with bot(tmp_path) as h:
        assert h.rt.bolt.name == "cluster-bot"
    assert walked == []
