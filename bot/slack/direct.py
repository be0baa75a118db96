"""Bolt's argument injection, skipped where the bot's code takes fixed arguments (issue 28.4).

Bolt calls every global middleware, and every listener's matcher in turn while it looks for the
listener a request is for, through `build_async_required_kwargs`: a dict of ~30 arguments a
function might name, each payload shape extracted from the body (`to_action`, `to_view`,
`to_command` …) — for every call, before the ack. The bot registers 4–5 global middleware and
~40 listeners, so a click on a button registered 21st paid for it ~25 times before its ack (the
bare Bolt app of `benchmarks burst`: twice), ~1 ms of CPU per request, which a burst of 200
queues.

So a global middleware written as `func(req, resp, next)` is called with just those, and a
listener's builtin matcher (`app.command(…)`, `app.action(…)` …: a function of the body) with
just the body: the same functions, in the same order, with the same values — what matches and
what runs is still Bolt's decision (tests/e2e/test_workspace.py walks every listener).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.listener_matcher.async_builtins import AsyncBuiltinListenerMatcher
from slack_bolt.listener_matcher.async_listener_matcher import AsyncListenerMatcher
from slack_bolt.middleware.async_custom_middleware import AsyncCustomMiddleware
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse

MIDDLEWARE_ARGS = ["req", "resp", "next"]


def takes_req_resp_next(func: Any) -> bool:
    """Whether `func` is a coroutine function of exactly (req, resp, next)."""
    return inspect.iscoroutinefunction(func) \
        and inspect.getfullargspec(func).args == MIDDLEWARE_ARGS


class DirectMiddleware(AsyncCustomMiddleware):
    """A global middleware `func(req, resp, next)`, called with those three and nothing built."""

    async def async_process(self, *, req: AsyncBoltRequest, resp: BoltResponse,
                            next: Callable[[], Awaitable[BoltResponse]]) -> BoltResponse:
        return await self.func(req, resp, next)  # type: ignore[no-any-return]


class BodyMatcher(AsyncBuiltinListenerMatcher):
    """A builtin matcher (a function of the body alone), called with the body."""

    async def async_matches(self, req: AsyncBoltRequest, resp: BoltResponse) -> bool:
        return await self.func(body=req.body)  # type: ignore[no-any-return,misc]


def body_only(matcher: AsyncListenerMatcher) -> AsyncListenerMatcher:
    """`matcher` called with the body alone where it takes nothing else; else as it is."""
    if type(matcher) is AsyncBuiltinListenerMatcher and list(matcher.arg_names) == ["body"]:
        return BodyMatcher(func=matcher.func)
    return matcher
