"""Every Slack Web API answer is read in one place; one that can't be read is "maybe done".

Slack — or a proxy in front of it — does not always answer with JSON: an HTML 502 or 405, a
body cut short, `text/plain`, an empty body, or nothing at all (a timeout after the request
left). slack_sdk raises for those with whatever it had: a SlackApiError around an aiohttp
response (no `.get`), an AttributeError from reading a string as JSON, a bare timeout.
`AnsweredWebClient` turns each of them into `NoAnswer`: a `SlackApiError` whose response reads
like Slack's (`{"ok": false, "error": "unreadable_answer" | "no_answer"}`, `status_code`), so
every handler of Slack's refusals handles it too, and none raises its own error reading it.

Such a call may have taken effect. For chat.postMessage that means "maybe posted": a post made
for an outbox key (`posting(key)`, bot/slack/outbox.py) carries the key in its message metadata,
and `find_posted` looks for it in the channel's history (the thread's replies for a reply)
before anything is posted again (bot/slack/maybe.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse

UNREADABLE = "unreadable_answer"  # something came back that isn't Slack's JSON
NO_ANSWER = "no_answer"  # nothing came back: a timeout, a dropped connection
EVENT_TYPE = "clusterbot_post"  # the metadata's event type on posts made for an outbox key
HISTORY_LIMIT = 200  # messages read back when looking for a maybe-posted one

_key: ContextVar[str | None] = ContextVar("slack_post_key", default=None)


@contextlib.contextmanager
def posting(key: str) -> Iterator[None]:
    """chat.postMessage calls made inside carry `key` in their metadata."""
    token = _key.set(key)
    try:
        yield
    finally:
        _key.reset(token)


class Answer(dict[str, Any]):
    """What stands in for Slack's answer when there was none to read."""

    def __init__(self, error: str, status: int | None) -> None:
        super().__init__(ok=False, error=error)
        self.status_code = status
        self.headers: dict[str, str] = {}

    @property
    def data(self) -> dict[str, Any]:
        return self


class NoAnswer(SlackApiError):
    """Slack's answer to `method` was unreadable or never came: it may have taken effect
    (`maybe_done`), unless the request never left (no connection)."""

    def __init__(self, method: str, *, error: str, status: int | None, cause: str,
                 sent: bool, args: Mapping[str, Any]) -> None:
        super().__init__(  # type: ignore[no-untyped-call]
            f"Slack's answer to {method} was not readable ({cause}, HTTP {status})",
            Answer(error, status))
        self.method = method
        self.cause = cause
        self.maybe_done = sent
        self.channel = str(args["channel"]) if args.get("channel") else None
        self.thread_ts = str(args["thread_ts"]) if args.get("thread_ts") else None
        self.key = str(args.get("metadata", {}).get("event_payload", {}).get("key") or "") \
            if isinstance(args.get("metadata"), dict) else ""

    @property
    def maybe_posted(self) -> bool:
        return self.maybe_done and self.method == "chat.postMessage"


def _args(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    for part in ("json", "params", "data"):
        args = kwargs.get(part)
        if isinstance(args, Mapping):
            return dict(args)
    return {}


def _status(response: object) -> int | None:
    for name in ("status_code", "status"):
        value = getattr(response, name, None)
        if isinstance(value, int):
            return value
    return None


def slack_said(exc: BaseException) -> bool:
    """True when `exc` carries an answer Slack gave in its own words (an error code)."""
    if not isinstance(exc, SlackApiError) or isinstance(exc, NoAnswer):
        return False
    response = exc.response
    data = response if isinstance(response, dict) else getattr(response, "data", None)
    return isinstance(data, dict) and bool(data.get("error"))


def error_code(exc: BaseException) -> str | None:
    """Slack's error code in `exc` (`UNREADABLE` / `NO_ANSWER` for a `NoAnswer`), else None."""
    if isinstance(exc, NoAnswer):
        return str(exc.response["error"])
    if not slack_said(exc):
        return None
    assert isinstance(exc, SlackApiError)
    response = exc.response
    data = response if isinstance(response, dict) else getattr(response, "data", None)
    return str(data["error"]) if isinstance(data, dict) else None


def no_answer(exc: BaseException, method: str, kwargs: Mapping[str, Any]) -> NoAnswer | None:
    """`exc` (raised calling `method`) as a `NoAnswer`; None when Slack answered readably."""
    if isinstance(exc, NoAnswer):
        return exc
    if slack_said(exc):
        return None
    args = _args(kwargs)
    if isinstance(exc, SlackApiError):  # a body that isn't Slack's JSON (HTML, cut, empty)
        return NoAnswer(method, error=UNREADABLE, status=_status(exc.response),
                        cause=f"{type(exc).__name__}", sent=True, args=args)
    if isinstance(exc, aiohttp.ClientConnectorError):  # never reached Slack: not done
        return NoAnswer(method, error=NO_ANSWER, status=None, cause=type(exc).__name__,
                        sent=False, args=args)
    if isinstance(exc, aiohttp.ClientError | TimeoutError):  # sent, then no (whole) answer
        return NoAnswer(method, error=NO_ANSWER, status=None, cause=type(exc).__name__,
                        sent=True, args=args)
    # slack_sdk reading a text/plain body as JSON (AttributeError, ValueError, TypeError …)
    return NoAnswer(method, error=UNREADABLE, status=None, cause=type(exc).__name__,
                    sent=True, args=args)


class AnsweredWebClient(AsyncWebClient):
    """A Web API client whose calls raise only Slack's own refusals (`SlackApiError` with its
    code) or `NoAnswer`; posts made for an outbox key carry it in their metadata."""

    async def api_call(self, api_method: str, **kwargs: Any) -> AsyncSlackResponse:
        key = _key.get()
        body = kwargs.get("json")
        if key is not None and api_method == "chat.postMessage" and isinstance(body, dict) \
                and "metadata" not in body:
            kwargs["json"] = {**body, "metadata": {"event_type": EVENT_TYPE,
                                                   "event_payload": {"key": key}}}
        try:
            return await super().api_call(api_method, **kwargs)
        except Exception as exc:
            unknown = no_answer(exc, api_method, kwargs)
            if unknown is None:
                raise
            raise unknown from exc


async def find_posted(client: AsyncWebClient, key: str, *, channel: str,
                      thread_ts: str | None, oldest: float) -> str | None:
    """The ts of the message posted for `key` in `channel` (in `thread_ts`'s thread) since
    `oldest` (Unix seconds), or None: Slack has no such message."""
    if thread_ts:
        found = await client.conversations_replies(channel=channel, ts=thread_ts,
                                                   oldest=f"{oldest:.6f}", limit=HISTORY_LIMIT,
                                                   include_all_metadata=True)
    else:
        found = await client.conversations_history(channel=channel, oldest=f"{oldest:.6f}",
                                                   limit=HISTORY_LIMIT,
                                                   include_all_metadata=True)
    for message in found.get("messages") or []:
        metadata = message.get("metadata") or {}
        if metadata.get("event_type") == EVENT_TYPE and \
                (metadata.get("event_payload") or {}).get("key") == key:
            return str(message["ts"])
    return None
