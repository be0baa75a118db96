"""The translation between the tables' rows and the domain models (`bot.domain.models`).

Rows never leave `storage/`: the repositories read and write through the Core `Table` objects of
storage/tables/ and hand back frozen domain models. Nested value objects (QuoteSpec, Workload,
ShapeSpec, PriceLine tuples, Observation, NoticeFacts) live in JSON columns as their pydantic
JSON dump, so validating the stored JSON gives back a model equal to the one written. Datetimes
inside that JSON are ISO strings with an explicit UTC offset and come back as aware UTC, like
the `UtcDateTime` columns. Enums are stored as their string values (plain strings, not database
enums: a new state needs no migration), money as BIGINT cents.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from functools import cache
from typing import Any, Generic, TypeVar, get_args

import sqlalchemy as sa
from pydantic import BaseModel, TypeAdapter
from pydantic_core import to_jsonable_python

M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

# Bound parameters per IN (…): well under SQLite's limit (32766; 999 before 3.32).
IN_CHUNK = 500


def in_chunks(values: Iterable[T]) -> Iterator[list[T]]:
    """`values` without repeats, in their order, IN_CHUNK at a time: one `IN (…)` each."""
    wanted = list(dict.fromkeys(values))
    for start in range(0, len(wanted), IN_CHUNK):
        yield wanted[start:start + IN_CHUNK]


def row_values(model: BaseModel) -> dict[str, Any]:
    """Column values for a domain model: datetimes as they are, everything else as JSON data.

    The JSON dump turns enums into their values and nested models/tuples into dicts/lists, which
    is exactly what the String and JSON columns want (see `json_data` for nested datetimes).
    """
    dumped = model.model_dump(mode="python")
    return {
        name: value if isinstance(value := getattr(model, name), datetime)
        else json_data(dumped[name])
        for name in type(model).model_fields
    }


def field_values(
    model_cls: type[BaseModel], fields: dict[str, Any], *, forbidden: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """Validate partial updates against the domain model's field types; return column values.

    An unknown or forbidden name is a programming error (TypeError, like a bad keyword); a value
    of the wrong type fails pydantic validation (ValueError), before anything reaches the database.
    """
    values: dict[str, Any] = {}
    for name, raw in fields.items():
        if name not in model_cls.model_fields or name in forbidden:
            raise TypeError(f"{model_cls.__name__} has no updatable field {name!r}")
        adapter = _adapter(model_cls, name)
        value = adapter.validate_python(raw)
        values[name] = value if isinstance(value, datetime) else json_data(
            adapter.dump_python(value, mode="python")
        )
    return values


# From this many rows on, `to_domain_many` converts in a worker thread, off the event loop.
MANY_ROWS = 64


@cache
def raw_columns(table: sa.Table) -> tuple[sa.ColumnElement[Any], ...]:
    """`table`'s columns as the driver returns them: no JSON decoding, no datetime parsing on
    the event loop (`to_domain_many` does it, on a thread for many rows). Built once per table
    (SQL elements are immutable): building them, a new type each, and the statement's cache
    key over new types took ~0.7 ms of every list of clusters."""
    return tuple(sa.type_coerce(c, sa.types.NullType()).label(c.name) for c in table.c)


class Remembered(Generic[M]):
    """The domain models of the rows one query read last time, by key (the first column): a
    row read again exactly as it was gives back the same (frozen) model, not converted again —
    a quiet watch sweep reads thousands of cluster rows that haven't changed. Holds only the
    rows of the last read."""

    def __init__(self) -> None:
        self._rows: dict[Any, tuple[tuple[Any, ...], M]] = {}


async def to_domain_many(model_cls: type[M], table: sa.Table, rows: Sequence[sa.Row[Any]],
                         dialect: sa.Dialect, *, remembered: Remembered[M] | None = None
                         ) -> list[M]:
    """The domain models of `rows` read through `raw_columns(table)`, in one batch: the
    column types' own result processing, then `to_domain`; on a thread when there are many (a
    thousand cluster rows take tens of milliseconds of CPU the event loop must not spend).
    With `remembered`, a row equal to the one read last time under its key is not converted."""
    names = [c.name for c in table.c]
    processors = [(i, p) for i, c in enumerate(table.c)
                  if (p := c.type._cached_result_processor(dialect, None)) is not None]

    def one(row: Sequence[Any]) -> M:
        values = list(row)
        for i, process in processors:
            values[i] = process(values[i])
        return to_domain(model_cls, dict(zip(names, values, strict=True)))

    def convert() -> list[M]:
        if remembered is None:
            return [one(row) for row in rows]
        before, now = remembered._rows, {}
        for row in rows:
            raw = tuple(row)
            seen = before.pop(raw[0], None)  # an old model replaced is let go at once
            now[raw[0]] = seen if seen is not None and seen[0] == raw else (raw, one(raw))
        remembered._rows = now
        return [now[row[0]][1] for row in rows]

    return convert() if len(rows) < MANY_ROWS else await asyncio.to_thread(convert)


def to_domain(model_cls: type[M], row: sa.RowMapping | Mapping[str, Any], *,
              skip: tuple[str, ...] = ()) -> M:
    """Build the domain model from a row mapping (surrogate keys named in `skip` left out)."""
    data = dict(row)
    for key in skip:
        data.pop(key, None)
    model = model_cls.model_validate(data)
    # Datetimes parsed from JSON carry pydantic's own UTC tzinfo: make them the `UTC` every
    # other datetime of the bot has (`UtcDateTime` columns already are).
    in_utc: M = _in_utc(model)
    return in_utc


def json_data(value: Any) -> Any:
    """JSON-ready data for a python-mode dump; nested datetimes become ISO strings in UTC.

    pydantic would write an aware datetime with whatever offset it has and a naive one as is;
    like `UtcDateTime`, a naive datetime is refused and every other one stored as UTC, so the
    JSON says which instant it means and reads back as aware UTC.
    """
    return to_jsonable_python(_utc_iso(value))


def _utc_iso(value: Any) -> Any:
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"naive datetime {value.isoformat()} refused: pass an aware one")
        return value.astimezone(UTC).isoformat()
    if isinstance(value, dict):
        return {key: _utc_iso(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_utc_iso(item) for item in value]
    return value


def _in_utc(value: Any) -> Any:
    """`value` with every datetime inside it (models, tuples, dicts) converted to `UTC`."""
    if isinstance(value, datetime):
        return value if value.tzinfo is UTC else value.astimezone(UTC)
    if isinstance(value, BaseModel):
        changes = {}
        for name in _timed_fields(type(value)):
            old = getattr(value, name)
            if (new := _in_utc(old)) is not old:
                changes[name] = new
        return value.model_copy(update=changes) if changes else value
    if isinstance(value, tuple):
        items = tuple(_in_utc(item) for item in value)
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if isinstance(value, dict):
        pairs = {key: _in_utc(item) for key, item in value.items()}
        return value if all(pairs[k] is value[k] for k in value) else pairs
    return value


@cache
def _timed_fields(model_cls: type[BaseModel]) -> tuple[str, ...]:
    """The fields of `model_cls` whose type may hold a datetime (at any depth): the only ones
    `_in_utc` needs to look into (a cluster row has ~35 fields, ~8 of them such)."""
    return tuple(name for name, f in model_cls.model_fields.items() if _may_hold_time(f.annotation))


def _may_hold_time(annotation: Any, seen: frozenset[Any] = frozenset()) -> bool:
    if annotation is datetime or annotation is Any:
        return True
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation not in seen and any(
            _may_hold_time(f.annotation, seen | {annotation})
            for f in annotation.model_fields.values())
    return any(_may_hold_time(arg, seen) for arg in get_args(annotation))


@cache
def _adapter(model_cls: type[BaseModel], name: str) -> TypeAdapter[Any]:
    annotation = model_cls.model_fields[name].annotation
    assert annotation is not None  # every field of a domain model is annotated
    return TypeAdapter(annotation)
