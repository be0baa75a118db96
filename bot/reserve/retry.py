"""Sending one AI Reserve request: headers, timeout, the answer check, and retries (§10).

The client (`client.py`) says *what* to call; this module says *how*: `Transport.send` is the only
function in the client that looks at an HTTP answer. `200 <= status < 300` is success; anything
else goes through `errors.error_from_response` (the one status → exception map); no answer at all
(`aiohttp.ClientError`, a timeout) becomes `TransportError`.

Retry policy (the caller says whether a request is safe to repeat):
- retried only on answers that mean "try again": 429, 502, 503, 504, `idempotency_key_in_use`
  and transport failures (`errors.is_retryable_status`). Never on other 4xx, nor on 500: a 500
  is a bug on the other side and the contract only *allows* retrying it, so it surfaces at once;
- capped exponential backoff with full jitter, `random() * min(cap, base * 2**attempt)`, and never
  less than the server's `Retry-After`. A server asking for more than `max_retry_after` seconds is
  not waited for: the error is raised so a person sees "retry in N s" instead of a silent hang;
- at most `max_retries` retries, then the last error is raised;
- what the server said about waiting outlives the call (pauses.py): a route under a
  `Retry-After`, or under a quota policy its `RateLimit` header shows exhausted, is refused
  locally (`RateLimited`, window "paused") until the wait has passed — no request is sent; a
  call that may be retried waits a pause out instead when it is no longer than a 429's would be.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from importlib import metadata
from typing import Any, TypeVar
from urllib.parse import urlencode

import aiohttp
from pydantic import BaseModel, ValidationError

from bot.clock import Clock, ProviderClock
from bot.reserve.bodies import (
    Known,
    OnSkip,
    UnexpectedResponse,
    decoded,
    json_or_none,
    skipped_item,
)
from bot.reserve.errors import (
    ApiError,
    RateLimited,
    ServerError,
    TransportError,
    error_from_response,
    is_retryable_status,
)
from bot.reserve.pauses import RoutePauses, route_of
from bot.reserve.schemas import Page, WireRequest

log = logging.getLogger("bot.reserve.client")

M = TypeVar("M", bound=BaseModel)
# Told of every attempt: (route template, HTTP status, or "error" without an answer, or
# "paused" when refused locally). The metrics (bot/observability/metrics.py) count them.
Observe = Callable[[str, str], None]

BACKOFF_BASE_SECONDS = 0.5
BACKOFF_CAP_SECONDS = 8.0
MAX_RETRY_AFTER_SECONDS = 60.0
PARSE_CHUNK = 20  # list items validated between two turns of the event loop


def _version() -> str:
    try:
        return metadata.version("cluster-bot")
    except metadata.PackageNotFoundError:  # running from a bare checkout
        return "0.0.0"


USER_AGENT = f"cluster-bot/{_version()}"


def retry_after_of(error: ApiError) -> float | None:
    """The server's `Retry-After` (already parsed to seconds by `error_from_response`), if any."""
    if isinstance(error, RateLimited | ServerError):
        return error.retry_after
    return None


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries with capped, fully jittered exponential backoff."""

    max_retries: int = 3
    base: float = BACKOFF_BASE_SECONDS
    cap: float = BACKOFF_CAP_SECONDS
    max_retry_after: float = MAX_RETRY_AFTER_SECONDS

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError("max_retries must be >= 0")

    def backoff(self, attempt: int, random: Callable[[], float]) -> float:
        """Full jitter: uniform in [0, min(cap, base * 2**attempt)); `attempt` counts from 0."""
        # Clamp the exponent so an absurd attempt count cannot overflow before min() applies.
        ceiling = min(self.cap, self.base * 2.0 ** min(attempt, 32))
        return random() * ceiling

    def delay(
        self, error: ApiError, *, attempt: int, random: Callable[[], float]
    ) -> float | None:
        """Seconds to wait before retry number `attempt + 1`, or None to give up and raise."""
        if attempt >= self.max_retries or not is_retryable_status(error):
            return None
        retry_after = retry_after_of(error)
        if retry_after is not None and retry_after > self.max_retry_after:
            return None
        return max(self.backoff(attempt, random), retry_after or 0.0)


class Sent:
    """How many HTTP requests went out to AI Reserve inside `counting_sent()` (each retry is one
    more; a call refused locally by a pause sends none)."""

    def __init__(self) -> None:
        self.requests = 0


_SENT: ContextVar[Sent | None] = ContextVar("aireserve_sent", default=None)


@contextmanager
def counting_sent() -> Iterator[Sent]:
    """Count the requests the calls made in this block (this task) send: what AI Reserve
    received, which is what a person is told ("after 17 requests"), not how often we asked
    the client."""
    sent = Sent()
    token = _SENT.set(sent)
    try:
        yield sent
    finally:
        _SENT.reset(token)


def _check_key(key: str) -> str:
    if not 1 <= len(key) <= 255:
        raise ValueError("an Idempotency-Key is 1-255 characters (contract §8)")
    return key


class Transport:
    """Authenticated JSON requests to one AI Reserve base URL, with the retry policy applied."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        base_url: str,
        api_key: str,
        *,
        timeout: float,
        policy: RetryPolicy,
        clock: Clock,
        sleep: Callable[[float], Awaitable[None]],
        random: Callable[[], float],
        pauses: RoutePauses | None = None,
        observe: Observe | None = None,
    ) -> None:
        self._session = session
        self._observe = observe
        self.pauses = pauses or RoutePauses(clock)
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        self._timeout = timeout
        self.policy = policy
        self.clock = clock
        self.sleep = sleep
        self.random = random

    def __repr__(self) -> str:  # never show the key
        return f"Transport({self.base_url!r})"

    async def send(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: WireRequest | None = None,
        headers: Mapping[str, str] | None = None,
        retry: bool,
        stream: bool = False,
        auth: bool = True,
    ) -> aiohttp.ClientResponse:
        """Send, map the answer, retry what may be retried. A non-stream body is read in full
        before returning; a stream is returned open, for the caller to release."""
        sent = {"User-Agent": USER_AGENT, "Accept": "application/json", **(headers or {})}
        if auth:
            sent["Authorization"] = f"Bearer {self._api_key}"
        payload: bytes | None = None
        if body is not None:
            payload = json.dumps(body.to_wire(), separators=(",", ":")).encode()
            sent["Content-Type"] = "application/json; charset=utf-8"
        # A stream may legitimately last long: bound the connect and each read, not the total.
        timeout = (
            aiohttp.ClientTimeout(total=None, sock_connect=self._timeout, sock_read=self._timeout)
            if stream else aiohttp.ClientTimeout(total=self._timeout)
        )
        route = route_of(method, path)
        attempt = 0
        while True:
            error: ApiError
            if (left := self.pauses.left(route)) > 0:
                if not (retry and self.policy.max_retries and left <= self.policy.max_retry_after):
                    self._told(route, "paused")
                    raise self.pauses.refusal(route, left)
                log.debug("%s: paused, waiting %.1fs before sending", route, left)
                await self.sleep(left)  # a short pause is waited out, like a 429's
            provider_clock = self.clock if isinstance(self.clock, ProviderClock) else None
            sent_at = provider_clock.host_now() if provider_clock is not None else None
            if (counted := _SENT.get()) is not None:
                counted.requests += 1
            try:
                resp = await self._session.request(
                    method, self.base_url + path, params=params, data=payload, headers=sent,
                    timeout=timeout,
                )
                if provider_clock is not None and sent_at is not None:  # its Date header
                    provider_clock.observe(resp.headers.get("Date"), sent_at=sent_at)
            except (aiohttp.ClientError, TimeoutError) as exc:
                error = TransportError(f"{method} {path}: no answer ({type(exc).__name__})")
                self._told(route, "error")
                log.debug("%s %s -> no answer (%s), attempt %d",
                          method, path, type(exc).__name__, attempt + 1)
            else:
                log.debug("%s %s -> %d (request %s), attempt %d", method, path, resp.status,
                          resp.headers.get("X-Request-Id"), attempt + 1)
                self._told(route, str(resp.status))
                ok = 200 <= resp.status < 300
                if ok:
                    self.pauses.observe(route, headers=resp.headers, error=None)
                if ok and stream:
                    return resp
                try:
                    # Reading to the end hands the connection back; the body stays cached on
                    # `resp` (an explicit release() would make it unreadable).
                    raw = await resp.read()
                except (aiohttp.ClientError, TimeoutError) as exc:
                    resp.release()
                    error = TransportError(f"{method} {path}: answer cut off "
                                           f"({type(exc).__name__})")
                else:
                    if ok:
                        return resp
                    error = error_from_response(
                        resp.status, json_or_none(raw), resp.headers, now=self.clock.now()
                    )
                    self.pauses.observe(route, headers=resp.headers, error=error)
            delay = None
            if retry:
                delay = self.policy.delay(error, attempt=attempt, random=self.random)
            if delay is None:
                raise error
            log.debug("%s %s: retrying in %.2fs after %s", method, path, delay, error.code)
            await self.sleep(delay)
            attempt += 1

    def _told(self, route: str, status: str) -> None:
        if self._observe is not None:
            self._observe(route, status)

    async def call(
        self,
        model: type[M],
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: WireRequest | None = None,
        idempotency_key: str | None = None,
        retry: bool | None = None,
        auth: bool = True,
    ) -> M:
        """One JSON request → one model. Retried by default iff a GET or carrying a key."""
        headers = None
        if idempotency_key is not None:
            headers = {"Idempotency-Key": _check_key(idempotency_key)}
        if retry is None:
            retry = method == "GET" or idempotency_key is not None
        resp = await self.send(method, path, params=params, body=body, headers=headers,
                               retry=retry, auth=auth)
        # buffered by send(): no I/O here
        return decoded(model, await resp.read(), where=f"{method} {path}", status=resp.status)

    async def paginate(
        self, model: type[M], path: str, params: Mapping[str, str] | None = None, *,
        on_skip: OnSkip | None = None,
    ) -> AsyncIterator[M]:
        """Every item of a `{data, nextCursor}` list, following `nextCursor` until null (the
        items of `pages`, one by one)."""
        async for page in self.pages(model, path, params, on_skip=on_skip):
            for item in page:
                yield item

    async def pages(
        self, model: type[M], path: str, params: Mapping[str, str] | None = None, *,
        on_skip: OnSkip | None = None, known: Known | None = None,
    ) -> AsyncIterator[list[M]]:
        """Each page of a `{data, nextCursor}` list as it arrives, following `nextCursor` until
        null.

        A bad item is one bad item: one that does not parse is skipped with one log line (its
        id and the field, never the payload) and handed to `on_skip`; the rest of the page is
        used. A page that is not a page at all (not JSON, an HTML error) still raises. An item
        `known` recognises (the caller holds it, parsed, exactly as it is) is left out unparsed,
        and so is a whole page it read before and holds every item of (not even decoded): a
        quiet sweep of thousands of clusters validates none of them and decodes no page.

        The event loop gets a turn every PARSE_CHUNK items validated: a page of 200 clusters
        is ~30 ms of pydantic, too long to hold Slack's acks up in one piece."""
        seen: set[str] = set()
        cursor: str | None = None
        while True:
            query = {**(params or {}), **({"cursor": cursor} if cursor else {})}
            items, next_cursor = await self._page(path, query, known)
            parsed: list[M] = []
            validated = 0
            for item in items:
                if known is not None and known.item(item):
                    continue
                validated += 1
                try:
                    parsed.append(model.model_validate(item))
                except ValidationError as exc:
                    skipped = skipped_item(item, exc)
                    log.warning("GET %s: skipped item %r, field %s: %s", path,
                                skipped.id or "<no readable id>", skipped.field, skipped.reason)
                    if on_skip is not None:
                        on_skip(skipped)
                if validated % PARSE_CHUNK == 0:
                    await asyncio.sleep(0)
            yield parsed
            if not next_cursor:
                return
            if next_cursor in seen:  # a buggy server would otherwise loop us forever
                raise UnexpectedResponse(f"GET {path} repeated a cursor", status=200)
            seen.add(next_cursor)
            cursor = next_cursor

    async def _page(self, path: str, query: Mapping[str, str], known: Known | None
                    ) -> tuple[list[dict[str, Any]], str | None]:
        """One page's items and nextCursor: no items when `known` holds the page as it is."""
        if known is None:
            page = await self.call(Page[dict[str, Any]], "GET", path, params=query)
            return page.data, page.next_cursor
        resp = await self.send("GET", path, params=query, retry=True)
        body, which = await resp.read(), urlencode(sorted(query.items()))
        if (held := known.page(which, body)) is not None:
            return [], held[0]
        page = decoded(Page[dict[str, Any]], body, where=f"GET {path}", status=resp.status)
        known.read(which, body, [item.get("id") for item in page.data], page.next_cursor)
        return page.data, page.next_cursor

