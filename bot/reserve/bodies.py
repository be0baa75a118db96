"""Reading AI Reserve's answers: a 2xx body into a model (or one clear error), a list's item
that does not parse, and what a caller already holds of a listing (retry.py's `Transport.pages`
leaves that out unparsed)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from bot.reserve.errors import ApiError

M = TypeVar("M", bound=BaseModel)


class UnexpectedResponse(ApiError, ValueError):
    """A 2xx answer whose body is not what the contract promises (not JSON, or wrong shape)."""

    code = "unexpected_response"


def json_or_none(raw: bytes) -> Any:
    """The JSON in `raw`, or None (e.g. a proxy's HTML error page)."""
    try:
        return json.loads(raw)
    except ValueError:
        return None


def parse_model(model: type[M], data: Any, *, where: str, status: int) -> M:
    """Validate a 2xx body; a mismatch is a clear `UnexpectedResponse`, not a pydantic trace."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '<body>'}: {err['msg']}"
            for err in exc.errors()[:3]
        )
        first = exc.errors()[0]["loc"] if exc.errors() else ()
        raise UnexpectedResponse(
            f"{where} answered {status} with a body that is not a {model.__name__} ({problems})",
            status=status, details={"field": ".".join(str(p) for p in first) or "<body>"},
        ) from None


@dataclass(frozen=True)
class SkippedItem:
    """A list item that did not parse: its id (None when even that is unreadable) and the first
    field that failed. Never the item itself: it may carry anything."""

    id: str | None
    field: str
    reason: str


OnSkip = Callable[[SkippedItem], None]


class Known(Protocol):
    """What a caller of `Transport.pages` already holds, parsed, as AI Reserve lists it now."""

    def item(self, item: dict[str, Any]) -> bool:
        """Whether it holds this listed item (its raw JSON object) as it is."""

    def page(self, query: str, body: bytes) -> tuple[str | None] | None:
        """Whether it holds every item of this page (`query`: which one), read before byte for
        byte: then `(its nextCursor,)`, and the page is not even decoded."""

    def read(self, query: str, body: bytes, ids: list[Any], next_cursor: str | None) -> None:
        """A page was decoded: its body, the ids of its items and its nextCursor."""


ID_SHOWN = 64  # a skipped item's id in the log: enough to find it, never a payload


def skipped_item(item: Any, exc: ValidationError) -> SkippedItem:
    first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid"}
    raw_id = item.get("id") if isinstance(item, dict) else None
    return SkippedItem(
        id=raw_id[:ID_SHOWN] if isinstance(raw_id, str) and raw_id else None,
        field=".".join(str(p) for p in first["loc"]) or "<item>", reason=str(first["msg"]),
    )


def decoded(model: type[M], body: bytes, *, where: str, status: int) -> M:
    """A 2xx body as `model`: not JSON, or not that shape, is an `UnexpectedResponse`."""
    try:
        data = json.loads(body)
    except ValueError:
        raise UnexpectedResponse(f"{where} answered {status} with a body that is not JSON",
                                 status=status) from None
    return parse_model(model, data, where=where, status=status)
