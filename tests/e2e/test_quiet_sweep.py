"""A quiet sweep costs what the listing costs (issue 28 item 3): a cluster AI Reserve lists
exactly as last time, whose stored row hasn't changed, is neither validated again (pydantic) nor
converted from its row again, and the sweep's SQL doesn't grow with the clusters — while a
change on either side (AI Reserve's answer, the bot's own row) is judged as before."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import event

from bot.jobs import sweeps
from bot.reserve import retry
from bot.reserve.schemas import Cluster, ShapeRequest
from bot.services.observing import observe, record_from_wire
from storage import rows
from storage.tables.clusters import CLUSTERS
from tests.e2e.harness import ALICE, GENERAL, Harness, bot

SHAPE = ShapeRequest(accelerator="h100-sxm-80gb", gpus_per_node=8, nodes=2)


async def _tracked(h: Harness, n: int) -> list[Cluster]:
    """`n` more running clusters at the simulator, each tracked and observed by the bot."""
    known = {w.id for w in h.sim.engine.list_clusters()}
    await asyncio.to_thread(h.sim.engine.seed_clusters, count=n, shape=SHAPE)
    h.clock.advance(120)
    wires = [w for w in h.sim.engine.list_clusters() if w.id not in known]
    now = h.clock.now()

    def records() -> list:
        return [record_from_wire(w, owner_id=ALICE, channel_id=GENERAL, request_id=None,
                                 accelerator_name="H100", now=now).model_copy(
                    update={"observed": observe(w), "connection_sent_at": now})
                for w in wires]

    made = await asyncio.to_thread(records)  # the test's set-up, off the watched event loop
    for start in range(0, len(made), 20):  # in small transactions, like the loop check wants
        async with h.rt.db.transaction() as repos:
            await repos.clusters.add_many(made[start:start + 20])
    return wires


@contextmanager
def _counted(h: Harness, monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """Listed clusters validated, stored cluster rows converted, pages of the listing decoded,
    SQL statements and writes."""
    seen: Counter[str] = Counter()
    validate, to_domain, decode = Cluster.model_validate, rows.to_domain, retry.decoded

    def decoding(model: Any, body: bytes, **kwargs: Any) -> Any:
        seen["pages decoded" if model.__name__.startswith("Page[") else "decoded"] += 1
        return decode(model, body, **kwargs)

    def validating(cls: Any, obj: Any, **kwargs: Any) -> Cluster:
        seen["validated"] += 1
        seen[f"validated {obj.get('id')}"] += 1
        return validate(obj, **kwargs)

    def converting(model_cls: Any, row: Any, **kwargs: Any) -> Any:
        seen[f"converted {model_cls.__name__}"] += 1
        return to_domain(model_cls, row, **kwargs)

    def on_execute(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        seen["statements"] += 1
        if statement.lstrip().split(None, 1)[0].upper() in ("INSERT", "UPDATE", "DELETE"):
            seen["writes"] += 1

    sync = h.rt.db.engine.sync_engine
    with monkeypatch.context() as m:
        m.setattr(Cluster, "model_validate", classmethod(validating))
        m.setattr(rows, "to_domain", converting)
        m.setattr(retry, "decoded", decoding)
        event.listen(sync, "before_cursor_execute", on_execute)
        try:
            yield seen
        finally:
            event.remove(sync, "before_cursor_execute", on_execute)


async def _sweep(h: Harness) -> None:
    h.clock.advance(5)
    await sweeps.watch_clusters(h.rt.services)


async def test_a_quiet_sweep_parses_and_converts_nothing_and_its_sql_does_not_grow(
        tmp_path, monkeypatch):
    async with bot(tmp_path) as h:
        await _tracked(h, 20)
        await _sweep(h)  # the first sweep judges every cluster
        with _counted(h, monkeypatch) as small:
            await _sweep(h)
        wires = await _tracked(h, 280)  # 300 now: two pages of the listing
        await _sweep(h)
        with _counted(h, monkeypatch) as large:
            await _sweep(h)
        assert large["validated"] == 0 and large["converted ClusterRecord"] == 0, large
        # AI Reserve answered both pages byte for byte as before: neither is even decoded.
        assert large["pages decoded"] == 0, large
        assert large["writes"] == 0, large
        assert large["statements"] == small["statements"], (small, large)

        # AI Reserve's side changes: that cluster, and only it, is read and judged again.
        failing = wires[7].id
        h.sim.engine.fail_node(failing, 1, "unhealthy")
        with _counted(h, monkeypatch) as changed:
            await _sweep(h)
        assert changed["validated"] == changed[f"validated {failing}"] == 1, changed
        assert changed["pages decoded"] == 1, changed  # its page, not the other
        async with h.rt.db.transaction() as repos:
            record = await repos.clusters.get(failing)
            assert record is not None and record.status.value == "degraded"
            degraded = [n for n in await repos.notices.pending(limit=1000)
                        if n.cluster_id == failing]
        assert [n.kind.value for n in degraded] == ["degraded"]

        # The bot's side changes (its row, AI Reserve's answer the same): judged again too —
        # here the row says the connection details were never sent, so they go out now.
        quiet = wires[11].id
        async with h.rt.db.transaction() as repos:
            await repos.session.execute(sa.update(CLUSTERS).where(CLUSTERS.c.id == quiet)
                                        .values(connection_sent_at=None))
        with _counted(h, monkeypatch) as moved:
            await _sweep(h)
        assert moved[f"validated {quiet}"] == 1, moved  # read again, to be judged again
        async with h.rt.db.transaction() as repos:
            record = await repos.clusters.get(quiet)
        assert record is not None and record.connection_sent_at is not None


async def test_found_clusters_are_adopted_in_a_few_statements(tmp_path, monkeypatch):
    """A first install (item 1): the clusters found at AI Reserve are stored, audited and told
    in a few statements however many they are — not one INSERT each, which held the first
    sweep (and every tracked cluster's next look) for seconds at 1,000."""
    async with bot(tmp_path) as h:
        await asyncio.to_thread(h.sim.engine.seed_clusters, count=60, shape=SHAPE)
        h.clock.advance(120)
        with _counted(h, monkeypatch) as found:
            await _sweep(h)
        async with h.rt.db.transaction() as repos:
            adopted = await repos.clusters.unclaimed()
            trail = await repos.audit.list(limit=100)
        assert len(adopted) == 60
        assert sorted(e.subject_id for e in trail if e.action == "adopt") == sorted(
            c.id for c in adopted)
        assert found["writes"] <= 4, found


async def test_the_hour_mark_stores_many_clusters_per_statement(tmp_path, monkeypatch):
    """Item 3: when every cluster accrues an hour at once, each changed cluster is stored,
    reminded and queued for an edit as before — by a few statements per listed page, not a
    transaction of six each (106 s of CPU at 10,000)."""
    async with bot(tmp_path) as h:
        await _tracked(h, 60)
        await _sweep(h)
        h.clock.advance(3600)
        with _counted(h, monkeypatch) as hour:
            await _sweep(h)
        async with h.rt.db.transaction() as repos:
            reminded = {n.cluster_id for n in await repos.notices.pending(limit=1000)
                        if n.kind.value == "reminder"}
            live = await repos.clusters.list_live()
            edits = [i for i in await repos.outbox.retryable(now=h.clock.now(), limit=1000)
                     if i.key.startswith("refresh/cluster/")]
        assert len(reminded) == len(live) == len(edits) == 60
        assert all(c.observed is not None and c.accrued_hours >= 1
                   and c.last_reminded_hours == c.accrued_hours for c in live), live[0]
        assert hour["writes"] <= 2 * 3, hour  # two transactions (50 + 10): three writes each
