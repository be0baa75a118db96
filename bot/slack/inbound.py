"""What a signed request must look like before Bolt sees it: the shape Slack always sends.

`verified(raw, headers, secret=…)` is Slack's v0 signature check on the raw bytes, total over any
input: whatever the headers hold, it answers True or False (a 400-digit timestamp, a non-ASCII
one or a body that isn't UTF-8 included), never raises.

`parsed(raw, content_type)` parses the body exactly as Bolt would (JSON when the content type
says so or it starts with `{`; else a form, whose `payload` field is JSON) and returns it — the
body Bolt is handed, so a request is parsed once (`bolt_request`) — or raises `Malformed`
saying what is wrong with it in a few words. It checks the fields Bolt and the listeners read
without looking (`user.id`, each action's `action_id`, a view's `callback_id`, an event's
`type` …); it never decides anything about their values. A signed request that fails here is
answered 400, never passed on to crash in a listener.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import parse_qsl

from slack_bolt.request.async_request import AsyncBoltRequest

MAX_DEPTH = 64  # Slack's deepest payloads (a modal's state) nest about 10 levels
MAX_SKEW_SECONDS = 300  # Slack's replay window


def verified(raw: bytes, headers: Mapping[str, str], *, secret: str,
             now: float | None = None) -> bool:
    stamp = headers.get("X-Slack-Request-Timestamp", "")
    signature = headers.get("X-Slack-Signature", "")
    if not (stamp.isascii() and stamp.isdigit() and len(stamp) <= 12 and signature.isascii()):
        return False
    if abs((time.time() if now is None else now) - int(stamp)) > MAX_SKEW_SECONDS:
        return False
    mac = hmac.new(secret.encode(), b"v0:" + stamp.encode() + b":" + raw, hashlib.sha256)
    return hmac.compare_digest("v0=" + mac.hexdigest(), signature)


class Malformed(ValueError):
    """What is wrong with a signed request's body, in a few words (answered 400)."""


def parsed(raw: bytes, content_type: str | None) -> dict[str, Any]:
    """The body as Bolt parses it, once it is a shape the listeners can rely on."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise Malformed("the body is not UTF-8") from None
    if not text:
        raise Malformed("the body is empty")
    if "\0" in text:
        raise Malformed("the body holds a NUL character")
    if content_type == "application/json" or text.startswith("{"):
        body = _json(text)
        if isinstance(body, _Bad):
            raise Malformed(f"the JSON body is {body}")
        if not isinstance(body, dict):
            raise Malformed("the JSON body is not an object")
        return _valid(body, _event(body))
    form = parse_qsl(text, keep_blank_values=True)
    fields = dict(form)
    if len(fields) != len(form):
        raise Malformed("a form field is repeated")
    if "payload" in text:  # Bolt's own test: a form carrying an interactive payload
        payload = _json(fields.get("payload", ""))
        if isinstance(payload, _Bad):
            raise Malformed(f"the payload is {payload}")
        if not isinstance(payload, dict):
            raise Malformed("the payload is not a JSON object")
        return _valid(payload, _interactive(payload))
    return _valid(fields, _command(fields))


def bolt_request(raw: bytes, body: dict[str, Any], *, query: str,
                 headers: dict[str, str | Sequence[str]]) -> AsyncBoltRequest:
    """Bolt's HTTP request for `raw`, holding `body` (`parsed(raw, …)`): what Bolt's own
    constructor makes, without parsing the body a second time (a click's payload: ~0.2 ms).
    Bolt takes a parsed body only in Socket Mode, where it reads nothing else of the mode."""
    request = AsyncBoltRequest(body=body, query=query, headers=headers, mode="socket_mode")
    request.raw_body, request.mode = raw.decode("utf-8"), "http"
    return request


def _valid(body: dict[str, Any], problem: str | None) -> dict[str, Any]:
    if problem is not None:
        raise Malformed(problem)
    return body


class _Bad(ValueError):
    """Why a JSON text didn't parse (returned, not raised: a parse result like any other)."""


def _json(text: str) -> Any:
    # No deeper than it has opening brackets: counting them (in C) decides most bodies.
    if text.count("[") + text.count("{") > MAX_DEPTH and _depth(text) > MAX_DEPTH:
        return _Bad("nested too deeply")
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return _Bad("not JSON")


def _depth(text: str) -> int:
    """How deep brackets nest outside strings (a linear scan: no recursion to exhaust)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _is_str(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _has_user(payload: dict[str, Any]) -> bool:
    user = payload.get("user")
    return isinstance(user, dict) and _is_str(user.get("id"))


def _team_ok(payload: dict[str, Any]) -> bool:
    team = payload.get("team")
    return team is None or (isinstance(team, dict) and isinstance(team.get("id"), str | None))


def _command(fields: dict[str, str]) -> str | None:
    if "command" not in fields:
        return None  # not a command Bolt would route (it answers 404 itself)
    for name in ("command", "user_id", "channel_id"):
        if not fields.get(name):
            return f"the slash command has no {name}"
    if not _is_url(fields.get("response_url")):
        return "the slash command's response_url is not a URL"
    return None


def _is_url(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(("https://", "http://")) \
        and len(value) < 2048 and value.isprintable()


def _interactive(payload: dict[str, Any]) -> str | None:
    kind = payload.get("type")
    if not isinstance(kind, str) or not kind:
        return "the payload has no type"
    if not _has_user(payload):
        return "the payload has no user id"
    if not _team_ok(payload):
        return "the payload's team is not an object"
    if "response_url" in payload and not _is_url(payload["response_url"]):
        return "the payload's response_url is not a URL"
    for name in ("trigger_id", "api_app_id", "token"):
        if not isinstance(payload.get(name, ""), str):
            return f"the payload's {name} is not text"
    check = _BY_TYPE.get(kind)
    return None if check is None else check(payload)


def _block_actions(payload: dict[str, Any]) -> str | None:
    actions = payload.get("actions")
    if not isinstance(actions, list) or not actions:
        return "block_actions without actions"
    for action in actions:
        if not isinstance(action, dict) or not _is_str(action.get("action_id")):
            return "an action without an action_id"
        if not isinstance(action.get("block_id", ""), str):
            return "an action's block_id is not text"
        if not isinstance(action.get("value", ""), str):
            return "an action's value is not text"
    for name in ("container", "channel", "message", "view", "state"):
        if payload.get(name) is not None and not isinstance(payload[name], dict):
            return f"the payload's {name} is not an object"
    return None


def _view(payload: dict[str, Any]) -> str | None:
    view = payload.get("view")
    if not isinstance(view, dict) or not _is_str(view.get("callback_id")):
        return "a view payload without a view callback_id"
    if not isinstance(view.get("private_metadata", ""), str):
        return "the view's private_metadata is not text"
    state = view.get("state", {})
    values = state.get("values", {}) if isinstance(state, dict) else None
    if not isinstance(values, dict) or not all(
            isinstance(block, dict) and all(isinstance(v, dict) for v in block.values())
            for block in values.values()):
        return "the view's state is not blocks of inputs"
    return None


def _callback(payload: dict[str, Any]) -> str | None:
    return None if _is_str(payload.get("callback_id")) else "a shortcut without a callback_id"


_BY_TYPE: dict[str, Callable[[dict[str, Any]], str | None]] = {
    "block_actions": _block_actions,
    "view_submission": _view,
    "view_closed": _view,
    "shortcut": _callback,
    "message_action": _callback,
}


_USER_EVENTS = frozenset({"app_home_opened", "app_mention", "member_joined_channel"})


def _event(body: dict[str, Any]) -> str | None:
    kind = body.get("type")
    if kind == "url_verification":
        return None if isinstance(body.get("challenge"), str) else "a challenge that isn't text"
    if kind == "event_callback":
        event = body.get("event")
        if not isinstance(event, dict) or not _is_str(event.get("type")):
            return "an event without a type"
        user = event.get("user", "")
        if event["type"] == "user_change":  # the whole user object, not an id
            return None if isinstance(user, dict) and _is_str(user.get("id")) \
                else "a user_change without a user id"
        if not isinstance(user, str) or (event["type"] in _USER_EVENTS and not user):
            return "an event without a user id"
        return None
    if isinstance(body.get("payload"), dict):  # Socket Mode style; Bolt handles or 404s
        return _interactive(body["payload"])
    return None
