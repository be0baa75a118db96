"""Shared storage-test fixtures and sample builders.

`db` runs every test that takes it on a SQLite file, on an in-memory SQLite database and on a
fresh PostgreSQL database of the session's throwaway server (tests/pg.py; skipped where there is
none, failing in CI). `sqlite_db` is the two SQLite ones alone, for what only SQLite does;
`db_url` is the URL of a database nothing has touched yet (SQLite file or PostgreSQL), for tests
that migrate or open several `Database`s on one database. The builders make domain models with
sensible defaults; since a quote takes at most one request, `make_request("r-x")` sits on quote
"q-x" unless told otherwise, and `seed` stores one quote for each distinct `quote_id` of the
requests it is given. `make_observation`, `make_notice` and `make_volume` build the watcher's
models, `make_audit` an audit entry.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import pytest_asyncio

from bot.domain.models import (
    AuditEntry,
    ClusterRecord,
    ClusterState,
    LaunchRequest,
    NodeState,
    Observation,
    PriceLine,
    QuoteInfo,
    QuoteSpec,
    RequestStatus,
    ShapeSpec,
    VolumeRecord,
    Workload,
)
from bot.domain.watch import Notice, NoticeFacts, NoticeKind
from storage.db import Database
from tests.schema import migrated_sqlite

T0 = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
SHAPE = ShapeSpec(accelerator="h100-sxm-80gb", gpus_per_node=8, nodes=2)


def make_quote(id: str = "q-1", **changes) -> QuoteInfo:
    return QuoteInfo(**{
        "id": id,
        "spec": QuoteSpec(shape=SHAPE, storage_gb=1000, location="us-east-1", root_disk_gb=200),
        "accelerator_name": "NVIDIA H100 SXM 80GB",
        "location": "us-east-1",
        "hourly_cents": 6_412,
        "per_gpu_hourly_cents": 399,
        "lines": (
            PriceLine(label="GPUs", detail="16 × H100", hourly_cents=6_384),
            PriceLine(label="Storage", detail="1000 GB", hourly_cents=28),
        ),
        "availability": "high",
        "created_at": T0,
        "expires_at": T0 + timedelta(minutes=15),
        "requested_by": "U1",
        "channel_id": "C1",
        **changes,
    })


def quote_id_for(request_id: str) -> str:
    """The default quote of a sample request: "r-1" → "q-1" (one quote per request)."""
    return "q-" + request_id.removeprefix("r-")


def make_request(id: str = "r-1", quote_id: str | None = None, **changes) -> LaunchRequest:
    return LaunchRequest(**{
        "id": id,
        "quote_id": quote_id_for(id) if quote_id is None else quote_id,
        "requester_id": "U1",
        "team_id": "T1",
        "channel_id": "C1",
        "workload": Workload(
            name="train-1", image="nvcr.io/nvidia/pytorch:25.01-py3",
            docker_start_cmd=("bash", "-lc", "torchrun train.py"),
            env={"MALLOC_ARENA_MAX": "1", "NCCL_DEBUG": "INFO"}, ports=("22/tcp", "8888/http"),
            ssh_keys=("ssh-ed25519 AAAA… me",), auto_recovery=True,
        ),
        "status": RequestStatus.PENDING,
        "hourly_cents": 6_412,
        "created_at": T0,
        "updated_at": T0,
        **changes,
    })


def make_cluster(id: str = "c-1", request_id: str | None = "r-1", **changes) -> ClusterRecord:
    return ClusterRecord(**{
        "id": id,
        "request_id": request_id,
        "owner_id": "U1",
        "channel_id": "C1",
        "name": "train-1",
        "shape": SHAPE,
        "accelerator_name": "NVIDIA H100 SXM 80GB",
        "location": "us-east-1",
        "hourly_cents": 6_412,
        "status": ClusterState.PROVISIONING,
        "created_at": T0,
        "updated_at": T0,
        **changes,
    })


def make_observation(**changes) -> Observation:
    """A degraded cluster in its second episode, one recovery attempt running, rank 1 down."""
    return Observation(**{
        "status": ClusterState.DEGRADED,
        "episode": 2,
        "episode_started_at": T0 + timedelta(hours=3),
        "attempts_used": 1,
        "attempts_max": 3,
        "recovery_state": "in_progress",
        "auto_recovery": True,
        "skipped": (3,),
        "nodes": (
            NodeState(rank=0, status="running",
                      last_recovered_at=T0 + timedelta(hours=1, microseconds=250)),
            NodeState(rank=1, status="failed"),
        ),
        "accrued_cents": 25_648,
        "accrued_hours": 4,
        **changes,
    })


def make_notice(key: str = "degraded:2", cluster_id: str = "c-1", **changes) -> Notice:
    return Notice(**{
        "cluster_id": cluster_id,
        "key": key,
        "kind": NoticeKind.DEGRADED,
        "facts": NoticeFacts(episode=2, down_ranks=(1,), accrued_cents=25_648,
                             auto_recovery=True),
        "created_at": T0,
        **changes,
    })


def make_volume(id: str = "vol-1", **changes) -> VolumeRecord:
    return VolumeRecord(**{
        "id": id,
        "owner_id": "U1",
        "cluster_id": "c-1",
        "name": "datasets",
        "size_gb": 1000,
        "location": "us-east-1",
        "hourly_cents": 28,
        "status": "attached",
        "updated_at": T0,
        **changes,
    })


def make_audit(subject_id: str = "r-1", **changes) -> AuditEntry:
    return AuditEntry(**{
        "at": T0,
        "actor_id": "U2",
        "team_id": "T1",
        "action": "approve",
        "subject_id": subject_id,
        "amount_cents": 6_412,
        "outcome": "ok",
        "detail": "approved at $64.12/h (1 of 2)",
        "idempotency_key": None,
        **changes,
    })


async def seed(db: Database, *requests: LaunchRequest) -> None:
    """Store the given requests (default: r-1, pending) and a quote for each of their quote ids."""
    requests = requests or (make_request(),)
    async with db.transaction() as repos:
        for quote_id in dict.fromkeys(r.quote_id for r in requests):  # distinct, in order
            await repos.quotes.add(make_quote(quote_id))
        for r in requests:
            await repos.requests.add(r)


@pytest_asyncio.fixture(
    params=["file", "memory", pytest.param("postgres", marks=pytest.mark.postgres)]
)
async def db(request, tmp_path):
    if request.param == "postgres":
        # A fresh database on the session's server, copied from one migrated to head.
        url = request.getfixturevalue("pg_migrated_url")
    else:
        url = _migrated_sqlite_url(request.param, tmp_path)
    database = Database(url)
    await database.migrate()  # on PostgreSQL: finds the schema current
    yield database
    await database.dispose()


@pytest.fixture(params=["file", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request, tmp_path) -> str:
    """An unmigrated database: a SQLite file, or an empty PostgreSQL database."""
    if request.param == "postgres":
        url: str = request.getfixturevalue("pg_url")
        return url
    return _sqlite_url("file", tmp_path)


@pytest_asyncio.fixture(params=["file", "memory"])
async def sqlite_db(request, tmp_path):
    database = Database(_migrated_sqlite_url(request.param, tmp_path))
    await database.migrate()
    yield database
    await database.dispose()


def _sqlite_url(kind: str, tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'bot.db'}" if kind == "file" else "sqlite://"


def _migrated_sqlite_url(kind: str, tmp_path) -> str:
    """At the newest migration: a file copied from one migrated once (tests/schema.py); an
    in-memory database is migrated here, on the engine that holds it."""
    return migrated_sqlite(tmp_path / "bot.db") if kind == "file" else "sqlite://"
