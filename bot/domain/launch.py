"""The launch saga's stored intent: what is (about to be) sent to AI Reserve, and how it ended.

An intent is written in the same transaction that claims the request (`approved → launching`),
BEFORE the provider is called. It holds the idempotency key and the exact launch body, so a
worker that picks the launch up after a crash, a stop or a timeout sends the very same request
again (a replay, never a second launch) instead of rebuilding it from state that may have moved
on. A request may have several intents over its life (a fresh key after a stored 5xx, a retry
after capacity ran out, a launch from a re-priced quote); at most one is `open` at a time.
"""

from __future__ import annotations

import enum
from datetime import datetime

from bot.domain.models import Frozen, LaunchRequest, QuoteInfo, ShapeSpec


class IntentState(enum.StrEnum):
    OPEN = "open"              # sent, or about to be: the outcome is not known yet
    ACCEPTED = "accepted"      # AI Reserve made the cluster (`cluster_id`)
    FAILED = "failed"          # a definite refusal: nothing was made under this key
    SUPERSEDED = "superseded"  # replaced by a fresh key after no cluster was found for it


class LaunchBody(Frozen):
    """The keyword arguments of `ClusterProvider.launch_cluster`, exactly as first sent.

    Every quote-bound field is repeated, so AI Reserve refuses a launch at any other price
    (`price_changed`) than the quoted one."""

    quote_id: str
    name: str | None = None
    image: str | None = None
    docker_start_cmd: tuple[str, ...] | None = None
    env: dict[str, str] | None = None
    ports: tuple[str, ...] | None = None
    ssh_keys: tuple[str, ...] | None = None
    auto_recovery: bool | None = None
    shape: ShapeSpec
    location: str | None = None
    root_disk_gb: int | None = None
    storage_gb: int | None = None
    volume_id: str | None = None
    orchestrator: str | None = None  # slurm | ray; None: the default topology

    @classmethod
    def of(cls, request: LaunchRequest, quote: QuoteInfo) -> LaunchBody:
        w, spec = request.workload, quote.spec
        return cls(
            quote_id=quote.id, name=w.name, image=w.image,
            docker_start_cmd=w.docker_start_cmd or None, env=dict(w.env) or None,
            ports=w.ports or None, ssh_keys=w.ssh_keys or None, auto_recovery=w.auto_recovery,
            shape=spec.shape, location=spec.location, root_disk_gb=spec.root_disk_gb,
            storage_gb=spec.storage_gb, volume_id=spec.volume_id,
            orchestrator=spec.orchestrator if spec.orchestrator != "none" else None,
        )


class LaunchIntent(Frozen):
    idempotency_key: str
    request_id: str
    quote_id: str
    body: LaunchBody
    state: IntentState = IntentState.OPEN
    cluster_id: str | None = None
    server_errors: int = 0  # 5xx answers seen under this key (a second one: the key is spent)
    created_at: datetime
    updated_at: datetime
