"""The typed async AI Reserve client (contract §3, §10): one method per endpoint.

It takes its `aiohttp.ClientSession` from outside (ARCHITECTURE rule 3), so the bot shares one
session and tests point it at a fake or the simulator. `sleep`, `random` and `clock` are injected
so retries and `wait_for_cluster` never make a test wait. How a request is sent, checked and
retried lives in `retry.py` (`Transport.send`, the one function that looks at an HTTP answer).

Which calls are retried (on 429/502/503/504/transport failures, see `retry.py`):
- GETs;
- POSTs that carry an `Idempotency-Key`: launch and recover always do (the key is required),
  quote always does (a fresh one per call unless given), volume create when given one. A retry
  re-sends the SAME key, so the server replays the first answer instead of acting twice;
- `DELETE /clusters/{id}`: the contract makes terminate idempotent (a repeat is a 200 no-op);
- the cluster PATCHes (`rename`, `recovery`): they set an absolute value, a repeat changes nothing.
Not retried: volume create without a key, volume resize/rename (a repeated grow could read as a
shrink or a no-op) and volume delete (the contract does not say a repeat is harmless).

Logs are DEBUG only (logger `bot.reserve.client`): method, path, status, request id, attempt —
never headers, the key, bodies (env values, SSH keys) or server messages.
"""

from __future__ import annotations

import asyncio
import logging
import random as _random
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING
from urllib.parse import quote as _quote

import aiohttp

from bot.clock import Clock, SystemClock
from bot.reserve.bodies import Known, OnSkip, UnexpectedResponse, json_or_none, parse_model
from bot.reserve.errors import TransportError
from bot.reserve.port import StatusFilter
from bot.reserve.retry import Observe, RetryPolicy, Transport
from bot.reserve.schemas import (
    Accelerator,
    Account,
    Cluster,
    ClusterStatus,
    EmptyRequest,
    Event,
    Health,
    LaunchRequest,
    Location,
    LogLine,
    Logs,
    Orchestrator,
    Quote,
    QuoteRequest,
    RecoverySetting,
    RenameRequest,
    Shape,
    ShapeRequest,
    StorageRequest,
    Volume,
    VolumeCreateRequest,
    VolumeUpdateRequest,
    format_timestamp,
)

if TYPE_CHECKING:
    from bot.reserve.port import ClusterProvider

__all__ = ["SETTLED", "AsyncAIReserveClient", "ClusterWaitTimeout", "UnexpectedResponse"]

log = logging.getLogger(__name__)

SETTLED = frozenset({ClusterStatus.RUNNING, ClusterStatus.FAILED, ClusterStatus.TERMINATED})
"""Default end states for `wait_for_cluster`."""


class ClusterWaitTimeout(TimeoutError):
    """`wait_for_cluster` ran out of time; `.cluster` is the last state seen."""

    def __init__(self, message: str, *, cluster: Cluster) -> None:
        super().__init__(message)
        self.cluster = cluster


@dataclass(frozen=True)
class _SseEvent:
    id: str | None
    event: str | None
    data: str


def _seg(value: str) -> str:
    """An id as one path segment: opaque to us, so it must never add or change a path level."""
    return _quote(value, safe="")


def _cluster_params(status: StatusFilter, page_size: int | None) -> dict[str, str]:
    statuses = [status] if isinstance(status, str) else list(status or ())
    return ({} if status is None else {"status": ",".join(map(str, statuses))}  # StrEnum: value
            | ({} if page_size is None else {"limit": str(page_size)}))


def _shape(shape: ShapeRequest | Shape | str, gpus_per_node: int | None, nodes: int | None
           ) -> ShapeRequest:
    if isinstance(shape, str):
        if gpus_per_node is None or nodes is None:
            raise TypeError("quote_cluster(accelerator, gpus_per_node, nodes): counts required")
        return ShapeRequest(accelerator=shape, gpus_per_node=gpus_per_node, nodes=nodes)
    if gpus_per_node is not None or nodes is not None:
        raise TypeError("pass either a shape model or (accelerator, gpus_per_node, nodes)")
    if isinstance(shape, Shape):
        return ShapeRequest(
            accelerator=shape.accelerator, gpus_per_node=shape.gpus_per_node, nodes=shape.nodes
        )
    return shape


class AsyncAIReserveClient:
    """Async client for the AI Reserve cluster API; works against the service and the simulator."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 30.0,
        max_retries: int = 3,
        clock: Clock | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        random: Callable[[], float] = _random.random,
        observe: Observe | None = None,
    ) -> None:
        self._clock: Clock = clock or SystemClock()
        self._sleep = sleep
        self._http = Transport(
            session, base_url, api_key, timeout=timeout,
            policy=RetryPolicy(max_retries=max_retries), clock=self._clock, sleep=sleep,
            random=random, observe=observe,
        )

    def __repr__(self) -> str:  # never show the key
        return f"AsyncAIReserveClient({self._http.base_url!r})"

    # --- catalog --------------------------------------------------------------------------

    async def list_accelerators(self, location: str | None = None) -> list[Accelerator]:
        params = {"location": location} if location else None
        return [a async for a in self._http.paginate(Accelerator, "/accelerators", params)]

    async def list_locations(self) -> list[Location]:
        return [loc async for loc in self._http.paginate(Location, "/locations")]

    # --- quotes and launch ----------------------------------------------------------------

    async def quote_cluster(
        self,
        shape: ShapeRequest | Shape | str,
        gpus_per_node: int | None = None,
        nodes: int | None = None,
        *,
        orchestrator: Orchestrator | None = None,
        location: str | None = None,
        root_disk_gb: int | None = None,
        storage_gb: int | None = None,
        volume_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> Quote:
        """Price a shape. A fresh key is sent when none is given, so retries are replays."""
        request = QuoteRequest(
            shape=_shape(shape, gpus_per_node, nodes), orchestrator=orchestrator,
            location=location, root_disk_gb=root_disk_gb, volume_id=volume_id,
            storage=None if storage_gb is None else StorageRequest(size_gb=storage_gb),
        )
        key = idempotency_key or _new_key()
        return await self._http.call(Quote, "POST", "/clusters/quote", body=request,
                                     idempotency_key=key)

    async def get_quote(self, quote_id: str) -> Quote:
        return await self._http.call(Quote, "GET", f"/clusters/quotes/{_seg(quote_id)}")

    async def launch_cluster(
        self,
        quote_id: str,
        *,
        idempotency_key: str,
        name: str | None = None,
        image: str | None = None,
        docker_start_cmd: list[str] | None = None,
        env: dict[str, str] | None = None,
        ports: list[str] | None = None,
        ssh_keys: list[str] | None = None,
        auto_recovery: bool | None = None,
        shape: ShapeRequest | Shape | None = None,
        orchestrator: Orchestrator | None = None,
        location: str | None = None,
        root_disk_gb: int | None = None,
        storage_gb: int | None = None,
        volume_id: str | None = None,
    ) -> Cluster:
        """Launch from a quote; retried with the SAME key, so a repeat replays the first 201."""
        request = LaunchRequest(
            quote_id=quote_id, name=name, image=image, docker_start_cmd=docker_start_cmd,
            env=env, ports=ports, ssh_keys=ssh_keys,
            recovery=None if auto_recovery is None else RecoverySetting(auto=auto_recovery),
            shape=None if shape is None else _shape(shape, None, None),
            orchestrator=orchestrator, location=location, root_disk_gb=root_disk_gb,
            storage=None if storage_gb is None else StorageRequest(size_gb=storage_gb),
            volume_id=volume_id,
        )
        return await self._http.call(Cluster, "POST", "/clusters", body=request,
                                     idempotency_key=idempotency_key)

    # --- clusters -------------------------------------------------------------------------

    async def get_cluster(self, cluster_id: str) -> Cluster:
        return await self._http.call(Cluster, "GET", f"/clusters/{_seg(cluster_id)}")

    def iter_clusters(self, status: StatusFilter = None, *, page_size: int | None = None,
                      on_skip: OnSkip | None = None) -> AsyncIterator[Cluster]:
        return self._http.paginate(Cluster, "/clusters", _cluster_params(status, page_size),
                                   on_skip=on_skip)

    def cluster_pages(self, status: StatusFilter = None, *, page_size: int | None = None,
                      on_skip: OnSkip | None = None, known: Known | None = None
                      ) -> AsyncIterator[list[Cluster]]:
        return self._http.pages(Cluster, "/clusters", _cluster_params(status, page_size),
                                on_skip=on_skip, known=known)

    async def list_clusters(self, status: StatusFilter = None, *,
                            page_size: int | None = None) -> list[Cluster]:
        return [c async for c in self.iter_clusters(status, page_size=page_size)]

    async def terminate_cluster(self, cluster_id: str) -> Cluster:
        # Idempotent by contract (a repeat is a 200 no-op), so safe to retry without a key.
        return await self._http.call(Cluster, "DELETE", f"/clusters/{_seg(cluster_id)}",
                                     retry=True)

    async def recover_cluster(self, cluster_id: str, *, idempotency_key: str) -> Cluster:
        return await self._http.call(Cluster, "POST", f"/clusters/{_seg(cluster_id)}/recover",
                                     body=EmptyRequest(), idempotency_key=idempotency_key)

    async def set_auto_recovery(self, cluster_id: str, auto: bool) -> Cluster:
        return await self._http.call(Cluster, "PATCH", f"/clusters/{_seg(cluster_id)}/recovery",
                                     body=RecoverySetting(auto=auto), retry=True)

    async def rename_cluster(self, cluster_id: str, name: str) -> Cluster:
        return await self._http.call(Cluster, "PATCH", f"/clusters/{_seg(cluster_id)}",
                                     body=RenameRequest(name=name), retry=True)

    async def cluster_logs(
        self,
        cluster_id: str,
        node: int = 0,
        tail: int = 100,
        since: datetime | None = None,
        stream: str | None = None,
    ) -> Logs:
        return await self._http.call(Logs, "GET", f"/clusters/{_seg(cluster_id)}/logs",
                                     params=_log_params(node, tail, since, stream))

    async def stream_cluster_logs(
        self,
        cluster_id: str,
        node: int = 0,
        tail: int = 100,
        since: datetime | None = None,
        stream: str | None = None,
        *,
        last_event_id: str | None = None,
    ) -> AsyncIterator[LogLine]:
        """Log lines over SSE until the server closes; a dropped stream resumes by Last-Event-ID."""
        path = f"/clusters/{_seg(cluster_id)}/logs"
        params = _log_params(node, tail, since, stream)
        failures = 0
        while True:
            headers = {"Accept": "text/event-stream"}
            if last_event_id is not None:
                headers["Last-Event-ID"] = last_event_id
            resp = await self._http.send("GET", path, params=params, headers=headers,
                                         retry=True, stream=True)
            try:
                async for event in _read_sse(resp.content):
                    if event.id is not None:
                        last_event_id = event.id
                    if event.data:
                        yield _log_line(event, where=f"GET {path}")
                return
            except (aiohttp.ClientError, TimeoutError) as exc:
                error = TransportError(f"GET {path}: stream dropped ({type(exc).__name__})")
                delay = self._http.policy.delay(error, attempt=failures, random=self._http.random)
                if delay is None:
                    raise error from None
                log.debug("GET %s: stream dropped, resuming in %.2fs", path, delay)
                await self._sleep(delay)
                failures += 1
            finally:
                resp.release()

    def iter_events(self, cluster_id: str) -> AsyncIterator[Event]:
        return self._http.paginate(Event, f"/clusters/{_seg(cluster_id)}/events")

    async def wait_for_cluster(
        self,
        cluster_id: str,
        until: Iterable[ClusterStatus | str] = SETTLED,
        interval: float = 10.0,
        timeout: float = 1800.0,  # noqa: ASYNC109 - on the injected clock, not the loop's
    ) -> Cluster:
        """Poll until the status is in `until`; the timeout is measured on the injected clock."""
        targets = {ClusterStatus(s) for s in until}
        started = self._clock.now()
        while True:
            cluster = await self.get_cluster(cluster_id)
            if cluster.status in targets:
                return cluster
            if (self._clock.now() - started).total_seconds() >= timeout:
                raise ClusterWaitTimeout(
                    f"{cluster_id} still {cluster.status.value} after {timeout:.0f}s",
                    cluster=cluster,
                )
            await self._sleep(interval)

    # --- volumes, account, health ---------------------------------------------------------

    async def create_volume(
        self, size_gb: int, location: str, *, name: str | None = None,
        idempotency_key: str | None = None,
    ) -> Volume:
        request = VolumeCreateRequest(size_gb=size_gb, location=location, name=name)
        return await self._http.call(Volume, "POST", "/volumes", body=request,
                                     idempotency_key=idempotency_key)

    async def get_volume(self, volume_id: str) -> Volume:
        return await self._http.call(Volume, "GET", f"/volumes/{_seg(volume_id)}")

    def iter_volumes(self, *, page_size: int | None = None) -> AsyncIterator[Volume]:
        params = {"limit": str(page_size)} if page_size is not None else None
        return self._http.paginate(Volume, "/volumes", params)

    async def resize_volume(self, volume_id: str, size_gb: int) -> Volume:
        return await self._http.call(Volume, "PATCH", f"/volumes/{_seg(volume_id)}",
                                     body=VolumeUpdateRequest(size_gb=size_gb))

    async def rename_volume(self, volume_id: str, name: str) -> Volume:
        return await self._http.call(Volume, "PATCH", f"/volumes/{_seg(volume_id)}",
                                     body=VolumeUpdateRequest(name=name))

    async def delete_volume(self, volume_id: str) -> Volume:
        return await self._http.call(Volume, "DELETE", f"/volumes/{_seg(volume_id)}")

    async def get_account(self) -> Account:
        return await self._http.call(Account, "GET", "/account")

    async def health(self) -> Health:
        return await self._http.call(Health, "GET", "/health", auth=False)


def _new_key() -> str:
    return str(uuid.uuid4())  # randomness, not time: fine outside bot/clock.py


def _log_params(node: int, tail: int, since: datetime | None, stream: str | None
                ) -> dict[str, str]:
    params = {"node": str(node), "tail": str(tail)}
    if since is not None:
        params["since"] = format_timestamp(since)
    if stream is not None:
        params["stream"] = stream
    return params


async def _read_sse(lines: AsyncIterable[bytes]) -> AsyncIterator[_SseEvent]:
    """Server-sent events (WHATWG HTML §9.2): `id`, `event`, multi-line `data`, `:` comments."""
    event_id: str | None = None
    event_type: str | None = None
    data: list[str] = []
    async for raw in lines:
        line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        if not line:
            if data:  # an event without data is not dispatched, per the spec
                yield _SseEvent(event_id, event_type, "\n".join(data))
            event_type, data = None, []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            data.append(value)
        elif name == "event":
            event_type = value
        elif name == "id" and "\0" not in value:
            event_id = value  # the id persists across events until changed, per the spec
    # An event cut off before its blank line is dropped (spec); Last-Event-ID resumes it.


def _log_line(event: _SseEvent, *, where: str) -> LogLine:
    """An SSE `data:` field carries one log line as JSON (`{ts, stream, line}`)."""
    data = json_or_none(event.data.encode())
    if not isinstance(data, dict):
        raise UnexpectedResponse(f"{where} sent an SSE event that is not a JSON log line",
                                 status=200)
    return parse_model(LogLine, data, where=where, status=200)


if TYPE_CHECKING:

    def _satisfies_port(client: AsyncAIReserveClient) -> ClusterProvider:
        return client  # mypy proves the client implements the port
