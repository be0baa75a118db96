"""Two resumes in one process never run two launch attempts for the same request.

At start the runtime resumes an earlier run's launches in the background (`resume(at_start=True)`,
which renews a `launching` request with no lease cutoff), and the scheduler's periodic resume can
reach the same stale request meanwhile. The one process must make one attempt: one call to
AI Reserve and one "launch ok" in the audit trail (the key already kept it to one cluster).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest

from bot.domain.models import RequestStatus
from storage.repositories import Repos
from tests.e2e.harness import bot

# A guard for a broken test only (nothing waits on time passing): every step below is an event.
STUCK_SECONDS = 60


class Renews:
    """The database, except that a named task's second transaction — a resume's renew, after
    its listing — waits at a gate until `release(name)`; `at[name]` is set once it got there."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, db: Any, *names: str) -> None:
        self.at = {n: asyncio.Event() for n in names}
        self._go = {n: asyncio.Event() for n in names}
        self._opened: Counter[str] = Counter()
        real = db.transaction

        @contextlib.asynccontextmanager
        async def transaction() -> AsyncIterator[Repos]:
            task = asyncio.current_task()
            name = task.get_name() if task else ""
            self._opened[name] += 1
            if name in self._go and self._opened[name] == 2:
                self.at[name].set()
                await self._go[name].wait()
            async with real() as repos:
                yield repos

        monkeypatch.setattr(db, "transaction", transaction)

    def release(self, name: str) -> None:
        self._go[name].set()


class Posts:
    """AI Reserve's launch call, held until `answer()`: `keys` are the keys it was called with,
    `called[i]` is set once the (i+1)-th call is waiting."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, provider: Any) -> None:
        self.keys: list[str] = []
        self.called = [asyncio.Event(), asyncio.Event()]
        self._answer = asyncio.Event()
        real = provider.launch_cluster

        async def launch_cluster(quote_id: str, *, idempotency_key: str, **kwargs: Any) -> Any:
            self.keys.append(idempotency_key)
            self.called[min(len(self.keys), len(self.called)) - 1].set()
            await self._answer.wait()
            return await real(quote_id, idempotency_key=idempotency_key, **kwargs)

        monkeypatch.setattr(provider, "launch_cluster", launch_cluster)

    def answer(self) -> None:
        self._answer.set()


async def _either(task: asyncio.Task[int], event: asyncio.Event) -> None:
    """Wait until `task` is done or `event` is set."""
    waiter = asyncio.create_task(event.wait())
    await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()


async def test_start_and_periodic_resumes_launch_a_stale_request_once(tmp_path, database_url,
                                                                     monkeypatch):
    async with bot(tmp_path, database_url=database_url) as h:
        request = await h.approved_while_launch_fails(503, 100)
        assert request.status is RequestStatus.LAUNCHING  # unconfirmed: left to a resume
        await h.sim_admin("faults", {}, method="DELETE")
        h.clock.advance(31)  # past the lease: the periodic resume takes it too
        launching = h.rt.services.launching
        renews = Renews(monkeypatch, h.rt.db, "periodic", "start")
        posts = Posts(monkeypatch, h.rt.provider)
        async with asyncio.timeout(STUCK_SECONDS):
            # The periodic resume has seen the request and is about to renew its lease...
            periodic = asyncio.create_task(launching.resume(), name="periodic")
            await renews.at["periodic"].wait()
            # ...when start's resume (slow: an earlier run's launches) reaches the same request.
            start = asyncio.create_task(launching.resume(at_start=True), name="start")
            await _either(start, renews.at["start"])
            renews.release("periodic")  # renewed; its call to AI Reserve waits for the answer
            await _either(periodic, posts.called[0])
            renews.release("start")  # start's renew has no cutoff: it would renew it again
            await _either(start, posts.called[1])
            posts.answer()
            resumed = (await periodic, await start)
        assert posts.keys == [request.idempotency_key]  # one POST /v1/clusters
        [launched] = await h.requests_in_db()
        [cluster] = h.sim.engine.list_clusters()
        assert (launched.status, launched.cluster_id) == (RequestStatus.LAUNCHED, cluster.id)
        async with h.rt.db.transaction() as repos:
            trail = Counter((e.action, e.outcome) for e in await repos.audit.list(limit=50))
        assert trail[("launch", "ok")] == 1  # the audit trail says it once
        assert resumed == (1, 0)  # start's resume left it to the one already on it
