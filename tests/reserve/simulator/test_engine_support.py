"""Helpers shared by the engine tests (pure: no HTTP, a ManualClock, a fixed seed).

Named test_engine_*.py so it sits with the tests it serves; it holds no tests itself.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from aireserve_sim.config import SimConfig
from aireserve_sim.engine import LedgerEntry, SimulatorEngine
from bot.clock import ManualClock
from bot.reserve.schemas import (
    Cluster,
    ClusterStatus,
    LaunchRequest,
    Quote,
    QuoteRequest,
    ShapeRequest,
    StorageRequest,
)

# What an engine test gets from `from tests.reserve.simulator.test_engine_support import *`.
__all__ = ["H100", "PROVISION", "SSH_KEY", "START", "charges", "event_types", "launch", "make",
           "quote", "quote_req", "running"]

START = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
H100 = "h100-sxm-80gb"
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGm2kQ9v alice@example"
PROVISION = 5  # SimConfig default provision_seconds_per_node


def make(**overrides: Any) -> tuple[SimulatorEngine, ManualClock]:
    clock = ManualClock(START)
    return SimulatorEngine(SimConfig(**overrides), clock, seed=7), clock


def quote_req(*, accelerator: str = H100, gpus: int = 8, nodes: int = 2,
              storage_gb: int | None = None, **kw: Any) -> QuoteRequest:
    storage = StorageRequest(size_gb=storage_gb) if storage_gb is not None else None
    return QuoteRequest(
        shape=ShapeRequest(accelerator=accelerator, gpus_per_node=gpus, nodes=nodes),
        storage=storage, **kw,
    )


def quote(engine: SimulatorEngine, **kw: Any) -> Quote:
    return engine.quote(quote_req(**kw))


def launch(engine: SimulatorEngine, q: Quote | None = None, **kw: Any) -> Cluster:
    """Launch `q` (or a fresh default quote) with workload settings `kw`."""
    q = q or quote(engine)
    return engine.launch(LaunchRequest(quote_id=q.id, **kw))


def running(engine: SimulatorEngine, clock: ManualClock, *, launch_kw: dict[str, Any] | None = None,
            **quote_kw: Any) -> tuple[Quote, Cluster]:
    """Quote, launch and advance exactly to readyAt."""
    q = quote(engine, **quote_kw)
    cluster = launch(engine, q, **(launch_kw or {}))
    engine.advance(PROVISION * q.shape.nodes)
    cluster = engine.get_cluster(cluster.id)
    assert cluster.status is ClusterStatus.RUNNING
    return q, cluster


def charges(engine: SimulatorEngine, resource_id: str, kind: str = "cluster_hour"
            ) -> list[LedgerEntry]:
    return [x for x in engine.ledger() if x.kind == kind and x.resource_id == resource_id]


def event_types(engine: SimulatorEngine, cluster_id: str) -> list[str]:
    return [e.type for e in engine.events(cluster_id)]
