"""Claims and leases, on SQLite and PostgreSQL: of any number of replicas exactly one posts a
notice or an outbox post, exactly one holds a lease; a dead holder's claim is taken over once it
expires. Several `Database` objects on one database stand for several replicas."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from storage.db import Database
from storage.replica import Lease
from tests.storage.conftest import T0, make_cluster, make_notice

TTL = timedelta(seconds=30)
REPLICAS = 4


async def _replicas(url: str) -> list[Database]:
    dbs = [Database(url) for _ in range(REPLICAS)]
    await dbs[0].migrate()
    return dbs


async def _close(dbs: list[Database]) -> None:
    for each in dbs:
        await each.dispose()


async def test_concurrent_deliverers_post_each_notice_once(db_url):
    dbs = await _replicas(db_url)
    try:
        async with dbs[0].transaction() as repos:
            await repos.clusters.add(make_cluster(request_id=None))
            await repos.notices.add_new([make_notice(f"k{n}") for n in range(30)])
        posted: list[tuple[str, str]] = []

        async def deliverer(db: Database, holder: str) -> None:
            while True:
                async with db.transaction() as repos:
                    pending = await repos.notices.pending(limit=5, now=T0)
                if not pending:
                    return
                for notice in pending:
                    async with db.transaction() as repos:
                        if not await repos.notices.claim(notice.cluster_id, notice.key,
                                                         holder=holder, now=T0, ttl=TTL):
                            continue
                    posted.append((holder, notice.key))  # "Slack" is called here
                    await asyncio.sleep(0)  # let the other deliverers race meanwhile
                    async with db.transaction() as repos:
                        await repos.notices.mark_delivered(notice.cluster_id, notice.key,
                                                           now=T0)

        await asyncio.gather(*(deliverer(dbs[n % REPLICAS], f"replica-{n}") for n in range(8)))
        keys = sorted(key for _, key in posted)
        assert keys == sorted(f"k{n}" for n in range(30))  # each once: none twice, none missed
        async with dbs[0].transaction() as repos:
            assert await repos.notices.pending() == []
    finally:
        await _close(dbs)


async def test_a_dead_deliverers_notice_claim_is_taken_over_when_it_expires(db):
    async with db.transaction() as repos:
        await repos.clusters.add(make_cluster(request_id=None))
        await repos.notices.add_new([make_notice("k")])
        assert await repos.notices.claim("c-1", "k", holder="dead", now=T0, ttl=TTL)
        # Claimed and live: nobody else takes it, and it is not offered as pending.
        assert not await repos.notices.claim("c-1", "k", holder="b", now=T0 + TTL / 2, ttl=TTL)
        assert await repos.notices.pending(now=T0 + TTL / 2) == []
        assert [n.key for n in await repos.notices.pending(now=T0 + TTL)] == ["k"]
        assert await repos.notices.claim("c-1", "k", holder="b", now=T0 + TTL, ttl=TTL)
        await repos.notices.mark_delivered("c-1", "k", now=T0 + TTL)
        # Delivered: never claimed again, whenever.
        assert not await repos.notices.claim("c-1", "k", holder="c", now=T0 + 10 * TTL, ttl=TTL)


async def test_a_released_notice_claim_is_free_at_once(db):
    async with db.transaction() as repos:
        await repos.clusters.add(make_cluster(request_id=None))
        await repos.notices.add_new([make_notice("k")])
        assert await repos.notices.claim("c-1", "k", holder="a", now=T0, ttl=TTL)
        await repos.notices.release("c-1", "k", holder="other")  # not its claim: no effect
        assert not await repos.notices.claim("c-1", "k", holder="b", now=T0, ttl=TTL)
        await repos.notices.release("c-1", "k", holder="a")
        assert await repos.notices.claim("c-1", "k", holder="b", now=T0, ttl=TTL)


async def test_concurrent_outbox_claims_of_one_key_have_one_winner(db_url):
    dbs = await _replicas(db_url)
    try:
        async def claim(n: int) -> bool:
            async with dbs[n % REPLICAS].transaction() as repos:
                return await repos.outbox.claim("tell/U1/x", kind="dm", target="U1",
                                                holder=f"r{n}", now=T0, ttl=TTL,
                                                payload={"user": "U1"})

        results = await asyncio.gather(*(claim(n) for n in range(12)))
        assert sorted(results) == [False] * 11 + [True]
    finally:
        await _close(dbs)


async def test_outbox_claim_lifecycle(db):
    async with db.transaction() as repos:
        claim = repos.outbox.claim
        assert await claim("k", kind="dm", target="U1", holder="a", now=T0, ttl=TTL,
                           payload={"user": "U1", "message": {"text": "hi"}})
        assert not await claim("k", kind="dm", target="U1", holder="b", now=T0, ttl=TTL)
        assert await repos.outbox.retryable(now=T0) == []  # claimed: not offered
        [item] = await repos.outbox.retryable(now=T0 + TTL)  # its claimer died
        assert (item.key, item.claimed_by, item.attempts) == ("k", "a", 1)
        await repos.outbox.release("k", holder="a")  # Slack refused it
        [item] = await repos.outbox.retryable(now=T0)
        assert item.payload == {"user": "U1", "message": {"text": "hi"}}
        assert await claim("k", kind="dm", target="U1", holder="b", now=T0, ttl=TTL)
        await repos.outbox.delivered("k", now=T0)
        assert not await claim("k", kind="dm", target="U1", holder="c", now=T0 + 9 * TTL,
                               ttl=TTL)
        assert (await repos.outbox.get("k")).delivered_at == T0
        assert await repos.outbox.retryable(now=T0 + 9 * TTL) == []


async def test_a_post_refused_again_and_again_is_never_given_up(db):
    async with db.transaction() as repos:
        for n in range(20):
            assert await repos.outbox.claim("k", kind="dm", target="U1", holder=f"r{n}",
                                            now=T0, ttl=TTL, payload={"user": "U1"})
            await repos.outbox.release("k", holder=f"r{n}")
        assert [i.key for i in await repos.outbox.retryable(now=T0)] == ["k"]


async def test_edits_queued_again_coalesce_and_a_claim_taken_before_is_not_marked_done(db):
    """The latest state wins; a deliverer holding the older state releases, not delivers."""
    later = T0 + TTL
    async with db.transaction() as repos:
        await repos.outbox.queue("edit/m", kind="edit", target="C1", payload={"v": 1}, now=T0)
        assert await repos.outbox.claim("edit/m", kind="edit", target="C1", holder="a",
                                        now=T0, ttl=TTL)
        await repos.outbox.queue("edit/m", kind="edit", target="C1", payload={"v": 2},
                                 now=later)
        await repos.outbox.delivered("edit/m", now=later, queued_at=T0)  # it sent v1
        [item] = await repos.outbox.retryable(now=later)
        assert (item.payload, item.delivered_at) == ({"v": 2}, None)
        assert await repos.outbox.claim("edit/m", kind="edit", target="C1", holder="b",
                                        now=later, ttl=TTL)
        await repos.outbox.delivered("edit/m", now=later, queued_at=later)
        assert await repos.outbox.retryable(now=later) == []
        await repos.outbox.queue("edit/m", kind="edit", target="C1", payload={"v": 3},
                                 now=later + TTL)  # a delivered edit armed again
        assert [i.payload for i in await repos.outbox.retryable(now=later + TTL)] == [{"v": 3}]


async def test_an_undeliverable_target_is_recorded_once_and_its_posts_wait_aside(db):
    """Posts to a target Slack refuses for good are not offered for retry (a page of them
    would starve every other post) until the target is reachable again."""
    async with db.transaction() as repos:
        for n in range(3):
            assert await repos.outbox.claim(f"gone/{n}", kind="dm", target="U1", holder="a",
                                            now=T0, ttl=TTL, payload={"user": "U1"})
            await repos.outbox.release(f"gone/{n}", holder="a")
        assert await repos.outbox.claim("other", kind="dm", target="U2", holder="a", now=T0,
                                        ttl=TTL, payload={"user": "U2"})
        await repos.outbox.release("other", holder="a")
        assert await repos.outbox.mark_undeliverable("U1", reason="user_disabled", now=T0)
        assert not await repos.outbox.mark_undeliverable("U1", reason="account_inactive",
                                                          now=T0 + TTL)
        [broken] = await repos.outbox.undeliverable()
        assert (broken.target, broken.payload, broken.created_at) == (
            "U1", {"reason": "user_disabled"}, T0)
        assert [i.key for i in await repos.outbox.retryable(now=T0, limit=1)] == ["other"]
        await repos.outbox.reachable_again("U1")
        assert await repos.outbox.undeliverable() == []
        assert len(await repos.outbox.retryable(now=T0)) == 4


async def test_posts_rebuilt_at_delivery_store_no_payload_and_are_not_retried_here(db):
    async with db.transaction() as repos:
        assert await repos.outbox.claim("connection/c-1", kind="connection", target="U1",
                                        holder="a", now=T0, ttl=TTL)
        await repos.outbox.release("connection/c-1", holder="a")
        assert (await repos.outbox.get("connection/c-1")).payload is None
        assert await repos.outbox.retryable(now=T0) == []


async def test_dm_channels_are_cached(db):
    async with db.transaction() as repos:
        assert await repos.dm_channels.get("U1") is None
        await repos.dm_channels.put("U1", "D1")
        await repos.dm_channels.put("U1", "D2")
        assert await repos.dm_channels.get("U1") == "D2"


class _Now:
    def __init__(self) -> None:
        self.at = T0

    def __call__(self):
        return self.at


async def test_one_lease_holder_among_concurrent_replicas_and_takeover_after_expiry(db_url):
    dbs = await _replicas(db_url)
    now = _Now()
    try:
        leases = [Lease(db=dbs[n], name="sweeps", holder=f"r{n}", ttl=TTL, now=now)
                  for n in range(REPLICAS)]
        held = await asyncio.gather(*(lease.hold() for lease in leases))
        assert sorted(held) == [False] * (REPLICAS - 1) + [True]
        leader = leases[held.index(True)]
        now.at += TTL / 2
        assert await leader.hold()  # renewed
        assert not any([await lease.hold() for lease in leases if lease is not leader])
        now.at += TTL / 2  # the first expiry passed, the renewal holds
        assert not any([await lease.hold() for lease in leases if lease is not leader])
        async with dbs[0].transaction() as repos:
            assert await repos.leases.holder("sweeps", now=now.at) == leader.holder
        now.at += TTL  # the leader died (stopped renewing): one other takes over
        others = [lease for lease in leases if lease is not leader]
        taken = await asyncio.gather(*(lease.hold() for lease in others))
        assert sorted(taken) == [False] * (REPLICAS - 2) + [True]
        assert not await leader.hold()  # back from the dead: it is not the leader any more
        successor = others[taken.index(True)]
        await successor.release()  # a clean stop: another takes over at once
        assert await leader.hold()
    finally:
        await _close(dbs)


async def test_newer_replicas_take_a_live_lease_from_an_older_one_exactly_one_wins(db_url):
    """A rollout: an old build (capability 1) holds the lease; three replicas of the new build
    (capability 2) try at once. One takes it over without waiting for the expiry, the others
    and the old one don't; the old one takes it again only once nobody newer renews."""
    dbs = await _replicas(db_url)
    now = _Now()
    try:
        old = Lease(db=dbs[0], name="sweeps", holder="old", ttl=TTL, capability=1, now=now)
        new = [Lease(db=dbs[n], name="sweeps", holder=f"new{n}", ttl=TTL, capability=2,
                     now=now) for n in range(1, REPLICAS)]
        assert await old.hold()
        taken = await asyncio.gather(*(lease.hold() for lease in new))
        assert sorted(taken) == [False] * (REPLICAS - 2) + [True]
        winner = new[taken.index(True)]
        assert not await old.hold()
        assert [await lease.hold() for lease in new] == [lease is winner for lease in new]
        async with dbs[0].transaction() as repos:
            assert await repos.leases.holder("sweeps", now=now.at) == winner.holder
        now.at += TTL  # every new replica is gone (a rollback): the old build sweeps again
        assert await old.hold()
    finally:
        await _close(dbs)
