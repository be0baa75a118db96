"""JSON in and out for the simulator server: bodies, query parameters, pages (contract §1).

Every way a request can be malformed ends here as a `400 invalid_request` whose
`details.field` names the camelCase path (`shmSizeGb`, `shape.foo`, `ports[1]`, `limit`) and
whose message says what is wrong, so no bad input ever reaches the engine untyped.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import math
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Protocol, TypeVar

from aiohttp import web
from pydantic import ValidationError

from bot.reserve.errors import InvalidRequest
from bot.reserve.schemas import ClusterStatus, WireRequest

MAX_BODY_BYTES = 64 * 1024
DEFAULT_LIMIT = 50
MAX_LIMIT = 200
STREAMS = ("stdout", "stderr", "system")

# The parsed JSON body, read once by the pipeline (it is also the idempotency fingerprint).
BODY = web.RequestKey("aireserve_body", object)

M = TypeVar("M", bound=WireRequest)


def json_response(
    status: int, payload: Any, headers: dict[str, str] | None = None
) -> web.Response:
    """`application/json; charset=utf-8`, compact."""
    return web.json_response(payload, status=status, headers=headers, dumps=dumps)


def dumps(payload: Any) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


# --- bodies ---------------------------------------------------------------------------------


def too_large() -> InvalidRequest:
    return InvalidRequest(
        f"The request body is larger than {MAX_BODY_BYTES // 1024} KiB.",
        details={"reason": "body_too_large", "maxBytes": MAX_BODY_BYTES},
    )


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e999 parses to inf
        raise ValueError(f"number {text[:20]} is out of range")
    return value


async def read_body(request: web.Request) -> Any:
    """The JSON body of a POST/PATCH (`{}` when empty); None for the other methods."""
    if request.method not in ("POST", "PATCH"):
        return None
    if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
        raise too_large()
    try:
        raw = await request.read()  # a chunked body is cut off by client_max_size
    except web.HTTPRequestEntityTooLarge:
        raise too_large() from None
    if not raw.strip():
        return {}
    try:
        return json.loads(
            raw.decode("utf-8"), parse_constant=_reject_constant, parse_float=_finite_float
        )
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise InvalidRequest(
            f"The request body is not valid JSON ({exc}).", details={"reason": "invalid_json"}
        ) from None


def parse_model(request: web.Request, model: type[M]) -> M:
    """The body as a strict request model; any mismatch is a 400 naming the camelCase field."""
    body = request[BODY]
    if not isinstance(body, dict):
        raise InvalidRequest(
            f"The request body must be a JSON object, not {type(body).__name__}.",
            details={"reason": "not_an_object"},
        )
    try:
        # by_name=False: the wire is camelCase only; `gpus_per_node` is an unknown field.
        return model.model_validate(body, by_alias=True, by_name=False)
    except ValidationError as exc:
        raise _validation_error(exc) from None


def _field_path(loc: Sequence[int | str]) -> str:
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else part)
    return path or "body"


_REASONS = {
    "extra_forbidden": "unknown_field", "missing": "missing", "int_type": "wrong_type",
    "string_type": "wrong_type", "bool_type": "wrong_type", "float_type": "wrong_type",
    "list_type": "wrong_type", "dict_type": "wrong_type", "model_type": "wrong_type",
    "literal_error": "invalid_value", "greater_than_equal": "out_of_range",
    "less_than_equal": "out_of_range", "finite_number": "out_of_range",
}


def _validation_error(exc: ValidationError) -> InvalidRequest:
    # An unknown field explains a "missing" twin (gpus_per_node vs gpusPerNode): report it first.
    errors = sorted(exc.errors(include_url=False), key=lambda e: e["type"] != "extra_forbidden")
    found = [
        {"field": _field_path(e["loc"]), "reason": _REASONS.get(e["type"], "invalid_value"),
         "message": e["msg"]}
        for e in errors
    ]
    first = found[0]
    if first["reason"] == "unknown_field":
        message = f"Unknown field '{first['field']}': request bodies are strict."
    else:
        message = f"Invalid field '{first['field']}': {first['message']}."
    return InvalidRequest(
        message, details={"field": first["field"], "reason": first["reason"], "errors": found}
    )


# --- query parameters -----------------------------------------------------------------------


def query(request: web.Request, allowed: set[str]) -> dict[str, str]:
    """Known parameters only, each at most once (`status` may repeat: its values are joined)."""
    out: dict[str, str] = {}
    for name in request.query:
        if name not in allowed:
            raise InvalidRequest(
                f"Unknown query parameter '{name}' (allowed: {', '.join(sorted(allowed))}).",
                details={"field": name, "reason": "unknown_field"},
            )
        values = request.query.getall(name)
        if len(values) > 1 and name != "status":
            raise InvalidRequest(
                f"Query parameter '{name}' was given more than once.",
                details={"field": name, "reason": "repeated"},
            )
        out[name] = ",".join(values)
    return out


def int_param(params: dict[str, str], name: str, *, default: int, low: int, high: int) -> int:
    raw = params.get(name, "")
    if raw == "":
        return default
    digits = raw.removeprefix("-")
    if not (digits.isascii() and digits.isdigit() and len(digits) <= 12) or not (
        low <= int(raw) <= high
    ):
        raise InvalidRequest(
            f"Query parameter '{name}' must be an integer from {low} to {high} (got {raw[:40]!r}).",
            details={"field": name, "reason": "out_of_range", "min": low, "max": high},
        )
    return int(raw)


def timestamp_param(raw: str, name: str) -> datetime:
    """RFC 3339 with a zone (`Z` or an offset); a naive or unparsable value is a 400."""
    try:
        value: datetime | None = datetime.fromisoformat(raw)
    except ValueError:
        value = None
    if value is None or value.tzinfo is None:
        raise InvalidRequest(
            f"'{name}' must be an RFC 3339 timestamp with a zone, e.g. 2026-11-29T21:30:00Z "
            f"(got {raw[:40]!r}).",
            details={"field": name, "reason": "invalid_timestamp"},
        )
    return value


_STATUSES = {s.value for s in ClusterStatus if s is not ClusterStatus.OTHER}


def statuses_param(raw: str) -> set[ClusterStatus] | None:
    """`?status=running,degraded` → those statuses; empty → no filter."""
    values = {v.strip() for v in raw.split(",") if v.strip()}
    unknown = sorted(values - _STATUSES)
    if unknown:
        raise InvalidRequest(
            f"Unknown status {unknown[0]!r} (allowed: {', '.join(sorted(_STATUSES))}).",
            details={"field": "status", "reason": "invalid_value"},
        )
    return {ClusterStatus(v) for v in values} or None


def stream_param(raw: str | None) -> str | None:
    if raw and raw not in STREAMS:
        raise InvalidRequest(
            f"'stream' must be one of {', '.join(STREAMS)} (got {raw[:40]!r}).",
            details={"field": "stream", "reason": "invalid_value"},
        )
    return raw or None


# --- pages ----------------------------------------------------------------------------------


class _Listed(Protocol):
    @property
    def id(self) -> str: ...

    def to_wire(self) -> dict[str, Any]: ...


_Item = TypeVar("_Item", bound=_Listed)


# Items rendered between two turns of the event loop by `rendered_page` (a page of 200
# clusters is ~20 ms of rendering: the bot under test may share the simulator's loop).
RENDER_STEP = 25


async def rendered_page(items: Sequence[_Item], params: dict[str, str]) -> dict[str, Any]:
    """`page`, rendering its items a few at a time and letting the event loop run between."""
    found = page(items, params, render=False)
    data = []
    for start in range(0, len(found["data"]), RENDER_STEP):
        if start:
            await asyncio.sleep(0)
        data += [item.to_wire() for item in found["data"][start:start + RENDER_STEP]]
    return {**found, "data": data}


def page(items: Sequence[_Item], params: dict[str, str], *, render: bool = True
         ) -> dict[str, Any]:
    """One page of `{data, nextCursor}` out of the engine's full, ordered list.

    The cursor is urlsafe base64 of {"o": offset, "a": id of the last item sent}. Resuming after
    the anchor keeps pages stable when newer items arrive in front (lists are newest first); the
    offset is only the fallback for an anchor that has gone (e.g. aged out of retention).
    """
    limit = int_param(params, "limit", default=DEFAULT_LIMIT, low=1, high=MAX_LIMIT)
    start = 0
    if params.get("cursor"):
        offset, anchor = _decode_cursor(params["cursor"])
        ids = [item.id for item in items]
        start = ids.index(anchor) + 1 if anchor in ids else min(offset, len(items))
    chunk = items[start:start + limit]
    end = start + len(chunk)
    next_cursor = _encode_cursor(end, chunk[-1].id) if chunk and end < len(items) else None
    return {"data": [item.to_wire() for item in chunk] if render else chunk,
            "nextCursor": next_cursor}


def _encode_cursor(offset: int, anchor: str) -> str:
    raw = json.dumps({"o": offset, "a": anchor}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: str) -> tuple[int, str]:
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        offset, anchor = data["o"], data["a"]
        if type(offset) is int and offset >= 0 and isinstance(anchor, str):
            return offset, anchor
    except (binascii.Error, ValueError, TypeError, KeyError, RecursionError):
        pass
    raise InvalidRequest(
        "Invalid cursor: pass back the nextCursor of the previous page unchanged.",
        details={"field": "cursor", "reason": "invalid_cursor"},
    )
