"""What the watch sweep found quiet: the clusters it needn't look at again until they change.

At 10,000 live clusters a quiet sweep used to validate every listed cluster (pydantic, ~0.3 ms
each), convert every stored row, and compare the two — seconds of CPU a sweep for nothing. A
cluster the last sweep judged quiet (`WatchService._due` said no) is remembered here with a
hash of its listed JSON object and the stored record it was judged against: while AI
Reserve lists it exactly as it was and its row is the same (storage/rows.py `Remembered` gives
back the same record object for an unchanged row), the judgement would be the same, so its
item is left unparsed.

A page of the listing that AI Reserve answers byte for byte as the last sweep read it, every
cluster on it quiet and its row unchanged, is not even decoded (JSON was most of a quiet sweep's
CPU): the bytes say every item is as it was, so each would be left unparsed anyway. The
pages are remembered by their query (status, page size, cursor) from the last sweep only.

Only judgements that time can't change are remembered: `_due` reads the clock only for the
payment grace (bot/domain/payment.py), so a cluster past due is judged afresh at every sweep —
as is one whose status this bot doesn't know (its warning is logged at each sweep).
"""

from __future__ import annotations

import marshal
from collections.abc import Mapping
from typing import Any

from bot.domain.models import ClusterRecord
from bot.reserve.schemas import Cluster, PaymentStatus
from bot.services.observing import state_of


def _digest(item: dict[str, Any]) -> int:
    # marshal version 2 writes values only, no back-references (which depend on how objects
    # are shared): equal JSON objects give equal bytes, ~8x faster than encoding JSON again.
    # Kept as their 64-bit hash (SipHash, keyed per process), not the ~2 KB themselves: ~20 MB
    # less at 10,000 clusters for ~0.3 us a cluster (BLAKE2b took ~4 us). A changed item taken
    # for the one before needs its hash to equal that one's: 2^-64 a comparison.
    return hash(marshal.dumps(item, 2))


class QuietClusters:
    """Per live cluster judged quiet: (the hash of its listed item, marshalled; the record it
    was judged against); per page of the listing: (the hash of its body, its items' ids, its
    nextCursor). One sweep at a time (`begin` starts one, `end` ends it); it is the listing's
    `Known` (bot/reserve/bodies.py), and adds what it holds to the sweep's `listed`."""

    def __init__(self) -> None:
        self._quiet: dict[str, tuple[int, ClusterRecord]] = {}
        self._listed: dict[str, int] = {}  # this sweep's digests of the items not known
        self._live: Mapping[str, ClusterRecord] = {}
        self._held: set[str] = set()  # the sweep's listed ids
        self._pages: dict[str, tuple[int, tuple[Any, ...], str | None]] = {}  # the last sweep's
        self._read: dict[str, tuple[int, tuple[Any, ...], str | None]] = {}  # … and this one's

    def begin(self, live: Mapping[str, ClusterRecord], listed: set[str]) -> None:
        """A sweep starts with these live records; clusters no longer live are forgotten. What
        it finds quiet is added to `listed`."""
        self._live, self._listed, self._held, self._read = live, {}, listed, {}
        self._quiet = {id: q for id, q in self._quiet.items() if id in live}

    def end(self) -> None:
        """The sweep is over: what it listed and its records are not held until the next
        (a sweep after every row changed would hold two sets of records at once)."""
        self._live, self._listed, self._held = {}, {}, set()
        self._pages, self._read = self._read, {}

    def item(self, item: dict[str, Any]) -> bool:
        """Whether `item` (a listed cluster's JSON object) is exactly as it was when judged
        quiet, and its record unchanged since."""
        cluster_id = item.get("id")
        if not isinstance(cluster_id, str) or cluster_id not in self._live:
            return False
        try:
            digest = _digest(item)
        except ValueError:  # not plain JSON data (never from a JSON body): judged as usual
            return False
        quiet = self._quiet.get(cluster_id)
        if quiet is not None and quiet[0] == digest and quiet[1] is self._live[cluster_id]:
            self._held.add(cluster_id)
            return True
        self._listed[cluster_id] = digest
        return False

    def page(self, query: str, body: bytes) -> tuple[str | None] | None:
        """`(its nextCursor,)` if this page is the one the last sweep read, byte for byte,
        and every cluster on it is still quiet with its record unchanged."""
        last = self._pages.get(query)
        if last is None or last[0] != hash(body) or not all(map(self._still_quiet, last[1])):
            return None
        self._read[query] = last
        self._held.update(last[1])
        return (last[2],)

    def read(self, query: str, body: bytes, ids: list[Any], next_cursor: str | None) -> None:
        """A page decoded this sweep (its items are judged next)."""
        self._read[query] = (hash(body), tuple(ids), next_cursor)

    def _still_quiet(self, cluster_id: Any) -> bool:
        quiet = self._quiet.get(cluster_id) if isinstance(cluster_id, str) else None
        return quiet is not None and quiet[1] is self._live.get(cluster_id)

    def judged(self, record: ClusterRecord, wire: Cluster, *, due: bool) -> None:
        """What the sweep made of a listed cluster (`due`: it syncs it)."""
        digest = self._listed.pop(record.id, None)
        if (due or digest is None or state_of(wire.status) is None
                or wire.billing.payment_status is PaymentStatus.PAST_DUE):
            self._quiet.pop(record.id, None)
        else:
            self._quiet[record.id] = (digest, record)
