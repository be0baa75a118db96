"""What the watch sweep found quiet: the clusters it needn't look at again until they change.

At 10,000 live clusters a quiet sweep used to validate every listed cluster (pydantic, ~0.3 ms
each), convert every stored row, and compare the two — seconds of CPU a sweep for nothing. A
cluster the last sweep judged quiet (`WatchService._due` said no) is remembered here with a
hash of its listed JSON object and the stored record it was judged against: while AI
Reserve lists it exactly as it was and its row is the same (storage/rows.py `Remembered` gives
back the same record object for an unchanged row), the judgement would be the same, so its
item is left unparsed.

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
    was judged against). One sweep at a time (`begin` starts one, `end` ends it)."""

    def __init__(self) -> None:
        self._quiet: dict[str, tuple[int, ClusterRecord]] = {}
        self._listed: dict[str, int] = {}  # this sweep's digests of the items not known
        self._live: Mapping[str, ClusterRecord] = {}

    def begin(self, live: Mapping[str, ClusterRecord]) -> None:
        """A sweep starts with these live records; clusters no longer live are forgotten."""
        self._live, self._listed = live, {}
        self._quiet = {id: q for id, q in self._quiet.items() if id in live}

    def end(self) -> None:
        """The sweep is over: what it listed and its records are not held until the next
        (a sweep after every row changed would hold two sets of records at once)."""
        self._live, self._listed = {}, {}

    def known(self, item: dict[str, Any]) -> bool:
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
            return True
        self._listed[cluster_id] = digest
        return False

    def judged(self, record: ClusterRecord, wire: Cluster, *, due: bool) -> None:
        """What the sweep made of a listed cluster (`due`: it syncs it)."""
        digest = self._listed.pop(record.id, None)
        if (due or digest is None or state_of(wire.status) is None
                or wire.billing.payment_status is PaymentStatus.PAST_DUE):
            self._quiet.pop(record.id, None)
        else:
            self._quiet[record.id] = (digest, record)
