"""storage/rows.py `Remembered`: a row read again exactly as it was gives back the same model;
a changed one is converted again, and the model it replaces is let go at once — a sweep after
every cluster changed (the hour mark) doesn't hold two sets of 10,000 records at its peak."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel, ConfigDict, model_validator
from sqlalchemy.dialects import sqlite

from storage.rows import Remembered, to_domain_many

TABLE = sa.Table("things", sa.MetaData(), sa.Column("id", sa.String, primary_key=True),
                 sa.Column("n", sa.Integer))
WATCHED: list[weakref.ref[Any]] = []  # the old "a", while "b" is converted
ALIVE: list[bool] = []


class Thing(BaseModel):
    model_config = ConfigDict(frozen=True)
    id: str
    n: int

    @model_validator(mode="after")
    def _note(self) -> Thing:
        if self.id == "b" and WATCHED:
            gc.collect()
            ALIVE.append(WATCHED[0]() is not None)
        return self


async def _read(rows: list[tuple[str, int]], remembered: Remembered[Thing]) -> list[Thing]:
    return await to_domain_many(Thing, TABLE, rows, sqlite.dialect(),  # type: ignore[arg-type]
                                remembered=remembered)


async def test_an_unchanged_row_is_the_same_model_and_a_replaced_one_is_let_go_at_once():
    remembered: Remembered[Thing] = Remembered()
    first = await _read([("a", 1), ("b", 1), ("c", 1)], remembered)
    again = await _read([("a", 1), ("b", 1), ("c", 2)], remembered)
    assert again[0] is first[0] and again[1] is first[1]
    assert again[2] == Thing(id="c", n=2) and again[2] is not first[2]

    WATCHED.append(weakref.ref(again[0]))
    del first, again
    changed = await _read([("a", 2), ("b", 2), ("c", 2)], remembered)
    assert [t.n for t in changed] == [2, 2, 2]
    assert ALIVE == [False]  # "a" was let go before "b" was converted
