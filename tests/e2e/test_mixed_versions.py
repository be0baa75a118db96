"""A rolling deploy: an older build (a lower SWEEP_CAPABILITY) holds the sweeps lease when a newer
one starts on the same database. The newer one takes the sweeps over at once — the old one stops
sweeping and says so (not finished, not the holder, /readyz not red for it) — and with only the
old one left it sweeps again rather than nobody (availability over purity)."""

from __future__ import annotations

from bot.app import runtime
from bot.config.settings import load_settings
from bot.jobs.scheduler import SWEEP_CAPABILITY
from tests.procs import wait_for

ENV = {"SLACK_BOT_TOKEN": "xoxb-test", "SLACK_SIGNING_SECRET": "s", "APPROVALS_CHANNEL": "C0A",
       "APPROVERS": "U0BOB", "SLACK_API_URL": "http://127.0.0.1:9/api/",
       # One hour: after their first ticks the scheduler leaves both alone; the test drives.
       "POLL_INTERVAL_SECONDS": "3600"}


def holder_gauge(rt: runtime.Runtime) -> float | None:
    return rt.metrics.registry.get_sample_value("clusterbot_sweeps_lease_holder")


async def run(rt: runtime.Runtime, job: str) -> None:
    assert rt.jobs is not None
    await rt.jobs.get_job(job).func(rt.services)


async def test_a_newer_build_takes_the_sweeps_over_and_the_old_one_stops(tmp_path):
    settings = load_settings({**ENV, "DATABASE_URL": f"sqlite:///{tmp_path / 'bot.db'}"})
    async with runtime.start(settings, capability=SWEEP_CAPABILITY - 1) as old:
        # Alone, the old build takes the lease at its first tick and sweeps at once.
        await wait_for(lambda: "watch_clusters" in old.sweeps.finished, what="the old sweep")
        assert old.sweeps.holder and holder_gauge(old) == 1
        async with runtime.start(settings) as new:
            # The new build takes the live lease over at its first tick, without waiting for
            # the old one's to expire, and sweeps at once.
            await wait_for(lambda: "watch_clusters" in new.sweeps.finished, what="the new sweep")
            assert new.sweeps.holder and holder_gauge(new) == 1
            # The old one learns it at its next attempt and no longer sweeps: its run is
            # skipped, not stamped finished, and it never takes the lease back.
            swept_at = old.sweeps.finished["watch_clusters"]
            await run(old, "watch_clusters")
            await run(old, "keep_lease")
            assert old.sweeps.finished["watch_clusters"] == swept_at
            assert not old.sweeps.holder and holder_gauge(old) == 0
            assert new.sweeps.holder
            # Not the holder, so not red for not sweeping, however long ago it last swept.
            old.sweeps.finished["watch_clusters"] -= 10 * 3600
            assert not any(r.startswith("sweep:") for r in await old.health.reasons())
        # The new one stopped cleanly and released the lease: the old build, alone again,
        # takes it at its next tick and sweeps.
        await run(old, "keep_lease")
        assert old.sweeps.holder and holder_gauge(old) == 1
        await run(old, "watch_clusters")
        assert old.sweeps.finished["watch_clusters"] > swept_at
