"""Reading a Web API request as Slack does: the token (a Bearer header, or the older `token`
argument) and the arguments (query string, JSON or form body; JSON inside a form decoded)."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from aiohttp import web

from devslack.models import SlackError

# Web API arguments that arrive JSON-encoded inside form or query strings.
_JSON_ARGS = ("blocks", "attachments", "view", "metadata", "files")


def bearer(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    if not header.startswith("Bearer "):
        return None
    return header.removeprefix("Bearer ").strip() or None


async def read_args(request: web.Request) -> dict[str, Any]:
    """Arguments from the query string and a JSON or form body, JSON-in-form decoded."""
    args: dict[str, Any] = dict(request.query)
    if request.can_read_body:
        if request.content_type == "application/json":
            body = await request.json()
            if not isinstance(body, dict):
                raise ValueError("a JSON body must be an object")
            args.update(body)
        else:
            form = await request.post()
            args.update({k: v for k, v in form.items() if isinstance(v, str)})
    for key in _JSON_ARGS:
        value = args.get(key)
        if isinstance(value, str):
            # a string that is not JSON stays a string: validation reports it as malformed
            with contextlib.suppress(ValueError):
                args[key] = json.loads(value)
    return args


def error_body(exc: SlackError) -> dict[str, Any]:
    body: dict[str, Any] = {"ok": False, "error": exc.code}
    if exc.detail:
        body["detail"] = exc.detail
        body["response_metadata"] = {"messages": [f"[ERROR] {exc.detail}"]}
    return body
