"""Slack Web API retries: a 429 waits `Retry-After`, then the same call goes again.

slack_sdk's own handlers sleep on the real clock; these take the sleep from outside (a 429's
`Retry-After`, and the backoff before a call that met a broken connection or a 5xx goes again),
so tests can assert the wait without spending it. Notices are posted once each: a retried call
is the same call, and Slack answers 429 without having posted anything. A chat.postMessage
that failed with a 5xx or a broken connection may have been posted: it is not retried here
(the outbox tries it again later, from whichever replica claims it).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable

from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState

Sleep = Callable[[float], Awaitable[None]]


class RateLimitRetry(AsyncRetryHandler):
    def __init__(self, *, max_retry_count: int = 5, sleep: Sleep = asyncio.sleep) -> None:
        super().__init__(max_retry_count=max_retry_count)
        self._sleep = sleep

    async def _can_retry_async(self, *, state: RetryState, request: HttpRequest,
                               response: HttpResponse | None = None,
                               error: Exception | None = None) -> bool:
        return response is not None and response.status_code == 429

    async def prepare_for_next_attempt_async(self, *, state: RetryState, request: HttpRequest,
                                             response: HttpResponse | None = None,
                                             error: Exception | None = None) -> None:
        state.next_attempt_requested = True
        wait = 1.0
        if response is not None:
            for name, values in response.headers.items():
                if name.lower() == "retry-after" and values and str(values[0]).isdigit():
                    wait = float(values[0])
        await self._sleep(wait + random.random() * 0.5)
        state.increment_current_attempt()


# Posts Slack may have made before the answer failed: never resent blindly (chat.postMessage
# has no idempotency key). The outbox claims each post, and retries it on a later pass.
_NOT_REPLAYABLE = ("/chat.postMessage",)


def _replayable(request: HttpRequest) -> bool:
    return not request.url.rstrip("/").endswith(_NOT_REPLAYABLE)


class _Replayable(AsyncRetryHandler):
    """A call that may be sent again (not a post) tries again after slack_sdk's backoff, waited
    with the given `sleep`; which failures count is the slack_sdk handler's, mixed in after."""

    def __init__(self, *, max_retry_count: int = 1, sleep: Sleep = asyncio.sleep) -> None:
        super().__init__(max_retry_count=max_retry_count)
        self._sleep = sleep

    async def _can_retry_async(self, *, state: RetryState, request: HttpRequest,
                               response: HttpResponse | None = None,
                               error: Exception | None = None) -> bool:
        return _replayable(request) and await super()._can_retry_async(
            state=state, request=request, response=response, error=error)

    async def prepare_for_next_attempt_async(self, *, state: RetryState, request: HttpRequest,
                                             response: HttpResponse | None = None,
                                             error: Exception | None = None) -> None:
        state.next_attempt_requested = True
        await self._sleep(self.interval_calculator.calculate_sleep_duration(
            state.current_attempt))
        state.increment_current_attempt()


class ConnectionErrorRetry(_Replayable, AsyncConnectionErrorRetryHandler):
    """A broken connection (slack_sdk's list of them)."""


class ServerErrorRetry(_Replayable, AsyncServerErrorRetryHandler):
    """A 5xx answer."""


def retry_handlers(sleep: Sleep = asyncio.sleep, *,
                   rate_limits: bool = True) -> list[AsyncRetryHandler]:
    """`rate_limits=False`: 429s are left to the pacer (bot/slack/pacing.py)."""
    return [
        *([RateLimitRetry(sleep=sleep)] if rate_limits else []),
        ConnectionErrorRetry(max_retry_count=2, sleep=sleep),
        ServerErrorRetry(max_retry_count=2, sleep=sleep),
    ]
