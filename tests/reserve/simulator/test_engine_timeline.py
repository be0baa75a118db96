"""Engine: simulated time, the events feed, node logs, the control surface and config."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from aireserve_sim.config import SimConfig
from aireserve_sim.engine import SimulatorEngine
from aireserve_sim.timeline import Timeline
from bot.clock import ManualClock
from bot.reserve import errors as e
from bot.reserve.schemas import (
    Availability,
    ClusterStatus,
    LaunchRequest,
    QuoteRequest,
    ShapeRequest,
)
from tests.reserve.simulator.test_engine_support import *

# --- the timeline ---------------------------------------------------------------------------


def test_timeline_runs_due_happenings_in_time_then_priority_order():
    timeline = Timeline(START)
    seen: list[tuple[str, datetime]] = []

    def note(label: str):
        return lambda: seen.append((label, timeline.now))

    t1, t2 = START + timedelta(seconds=1), START + timedelta(seconds=2)
    timeline.at(t2, note("late"))
    timeline.at(t1, note("money"), priority=1)
    timeline.at(t1, note("state"))
    timeline.at(START - timedelta(hours=1), note("past"))  # clamped to now
    timeline.run_until(t1)
    assert seen == [("past", START), ("state", t1), ("money", t1)]
    assert timeline.now == t1 and timeline.pending() == 1
    timeline.run_until(START)  # a clock stepping back does not move simulated time back
    assert timeline.now == t1
    timeline.run_until(t2 + timedelta(hours=1))
    assert seen[-1] == ("late", t2) and timeline.now == t2 + timedelta(hours=1)


def test_happenings_scheduled_while_running_still_run_in_order():
    timeline = Timeline(START)
    seen: list[int] = []
    timeline.at(START + timedelta(seconds=1),
                lambda: timeline.at(START + timedelta(seconds=1), lambda: seen.append(2)))
    timeline.at(START + timedelta(seconds=3), lambda: seen.append(3))
    timeline.run_until(START + timedelta(seconds=5))
    assert seen == [2, 3]


# --- events feed --------------------------------------------------------------------------


def test_events_feed_tells_the_story_in_order_with_exact_times():
    engine, clock = make(recovery_node_seconds=3, terminate_seconds=2)
    cluster = launch(engine)
    engine.advance(3 * 3600)  # boots, readyAt and three more accruals in one jump
    engine.fail_node(cluster.id, 1, "stopped")
    engine.recover(cluster.id)
    engine.advance(3)
    engine.terminate(cluster.id)
    engine.advance(2)
    events = engine.events(cluster.id)
    ready = START + timedelta(seconds=2 * PROVISION)
    fail_at = START + timedelta(hours=3)
    assert [(ev.type, ev.at) for ev in events] == [
        ("cluster.provisioning", START),
        ("cluster.running", ready),
        ("billing.hour_accrued", ready),
        ("billing.hour_accrued", ready + timedelta(hours=1)),
        ("billing.hour_accrued", ready + timedelta(hours=2)),
        ("cluster.degraded", fail_at),
        ("recovery.attempt_started", fail_at),
        ("recovery.node_recovered", fail_at + timedelta(seconds=3)),
        ("recovery.attempt_finished", fail_at + timedelta(seconds=3)),
        ("cluster.recovered", fail_at + timedelta(seconds=3)),
        ("cluster.terminating", fail_at + timedelta(seconds=3)),
        ("cluster.terminated", fail_at + timedelta(seconds=5)),
    ]
    ids = [ev.id for ev in events]
    assert all(i.startswith("evt_") for i in ids) and ids == sorted(ids) and len(set(ids)) == 12
    assert all(ev.cluster_id == cluster.id for ev in events)
    assert events[-2].data == {"reason": "requested"}


def test_event_ids_increase_across_clusters():
    engine, _ = make()
    a = launch(engine)
    b = launch(engine)
    engine.advance(60)
    merged = sorted(engine.events(a.id) + engine.events(b.id), key=lambda ev: (ev.at, ev.id))
    assert [ev.id for ev in merged] == sorted(ev.id for ev in merged)


# --- logs ---------------------------------------------------------------------------------


def test_logs_are_per_node_rank_zero_by_default():
    engine, clock = make()
    _, cluster = running(engine, clock, nodes=3, launch_kw={
        "docker_start_cmd": ["bash", "-lc", "/workspace/start.sh"],
        "env": {"HF_TOKEN": "hf_top_secret"}, "ssh_keys": [SSH_KEY]})
    logs = engine.logs(cluster.id)
    assert (logs.cluster_id, logs.node) == (cluster.id, 0)
    text = "\n".join(line.line for line in logs.lines)
    assert "10.65.0.2" in text and "$ bash -lc /workspace/start.sh" in text
    assert "NODE_RANK=0 NUM_NODES=3 GPUS_PER_NODE=8 WORLD_SIZE=24" in text
    assert "NCCL INFO" in text and "rendezvous" in text
    worker = engine.logs(cluster.id, node=2)
    assert "10.65.0.4" in "\n".join(line.line for line in worker.lines)
    every = "\n".join(line.line for n in range(3)
                      for line in engine.logs(cluster.id, node=n, tail=5000).lines)
    assert "hf_top_secret" not in every
    assert [ln.ts for ln in logs.lines] == sorted(ln.ts for ln in logs.lines)
    assert {ln.stream for ln in logs.lines} <= {"stdout", "stderr", "system"}
    assert logs.lines[0].ts == START and logs.lines[-1].ts == cluster.ready_at


def test_logs_tail_since_stream_and_next_since():
    engine, clock = make()
    _, cluster = running(engine, clock)
    everything = engine.logs(cluster.id, tail=5000).lines
    assert len(everything) > 3
    last_two = engine.logs(cluster.id, tail=2)
    assert last_two.lines == everything[-2:] and last_two.next_since == everything[-1].ts
    engine.advance(60)
    engine.fail_node(cluster.id, 0, "unhealthy")
    engine.recover(cluster.id)
    engine.advance(10)
    later = engine.logs(cluster.id, since=last_two.next_since)
    assert later.lines and all(ln.ts > everything[-1].ts for ln in later.lines)
    assert any("recovery attempt 1: restarting node 0" in ln.line for ln in later.lines)
    stderr = engine.logs(cluster.id, stream="stderr")
    assert stderr.lines and {ln.stream for ln in stderr.lines} == {"stderr"}
    nothing = engine.logs(cluster.id, since=clock.now())
    assert nothing.lines == [] and nothing.next_since == clock.now()


@pytest.mark.parametrize(("kw", "field"), [
    ({"node": 2}, "node"), ({"node": -1}, "node"), ({"node": 10**30}, "node"),
    ({"tail": 0}, "tail"), ({"tail": 5001}, "tail"), ({"tail": 10**30}, "tail"),
    ({"stream": "stdin"}, "stream"), ({"stream": ""}, "stream"),
    ({"since": datetime(2026, 1, 1)}, "since"),  # noqa: DTZ001 - a naive value on purpose
])
def test_bad_log_queries_are_400(kw, field):
    engine, _ = make()
    cluster = launch(engine)
    with pytest.raises(e.InvalidRequest) as caught:
        engine.logs(cluster.id, **kw)
    assert caught.value.field == field


def test_logs_tail_up_to_5000():
    engine, _ = make()
    cluster = launch(engine)
    assert engine.logs(cluster.id, tail=5000).lines


# --- control surface ----------------------------------------------------------------------


def test_advance_needs_a_virtual_clock():
    class WallClock:
        def __init__(self) -> None:
            self.at = START

        def now(self) -> datetime:
            return self.at

    wall = WallClock()
    engine = SimulatorEngine(SimConfig(), wall)
    with pytest.raises(e.InvalidState) as caught:
        engine.advance(10)
    assert "virtual" in caught.value.message
    # …but time still flows from the clock it has: the engine settles lazily on every call.
    shape = ShapeRequest(accelerator=H100, gpus_per_node=8, nodes=2)
    q = engine.quote(QuoteRequest(shape=shape))
    cluster = engine.launch(LaunchRequest(quote_id=q.id))
    wall.at = START + timedelta(minutes=90)
    cluster = engine.get_cluster(cluster.id)
    assert cluster.status is ClusterStatus.RUNNING and cluster.billing.accrued_hours == 2


@pytest.mark.parametrize("seconds", [-1, float("nan"), float("inf"), 10**30, 367 * 86400])
def test_advance_refuses_absurd_amounts(seconds):
    engine, clock = make()
    with pytest.raises(e.InvalidRequest) as caught:
        engine.advance(seconds)
    assert caught.value.field == "seconds" and clock.now() == START


def test_advance_returns_the_new_time():
    engine, _ = make()
    assert engine.advance(90.5) == START + timedelta(seconds=90.5)


def test_reset_forgets_everything_and_replays_the_same_ids():
    engine, _ = make()
    first = launch(engine)
    engine.set_balance(5)
    engine.set_capacity(accelerator=H100, location="us-tx", availability=Availability.NONE)
    engine.reset()
    assert engine.list_clusters() == [] and engine.ledger() == []
    assert engine.account().balance_cents == 10_000_000
    assert engine.list_accelerators("us-tx")[0].locations[0].availability is Availability.HIGH
    assert launch(engine).id == first.id  # same seed, same ids


def test_ledger_entries_carry_what_the_server_shows():
    engine, clock = make()
    q, cluster = running(engine, clock)
    entry = engine.ledger()[-1]
    assert (entry.at, entry.kind, entry.resource_id, entry.cents, entry.paid) == (
        cluster.ready_at, "cluster_hour", cluster.id, q.rate.hourly_cents, True)
    assert entry.note


def test_absurd_inputs_only_ever_raise_typed_4xx_errors():
    engine, clock = make()
    _, cluster = running(engine, clock)
    huge, empty, junk = 10**30, "", "\x00" * 3 + "é" * 100
    attempts: list[Callable[[], object]] = [
        lambda: quote(engine, nodes=huge, gpus=huge),
        lambda: quote(engine, accelerator=empty, location=empty),
        lambda: quote(engine, root_disk_gb=-huge),
        lambda: quote(engine, storage_gb=-huge),
        lambda: quote(engine, volume_id=junk),
        lambda: engine.get_quote(empty),
        lambda: engine.get_cluster(junk),
        lambda: launch(engine, name=junk),
        lambda: launch(engine, env={junk: junk}),
        lambda: launch(engine, ports=[junk]),
        lambda: launch(engine, ssh_keys=[junk]),
        lambda: launch(engine, image=junk),
        lambda: launch(engine, docker_start_cmd=[junk]),
        lambda: engine.logs(cluster.id, node=huge, tail=huge),
        lambda: engine.logs(cluster.id, stream=junk),
        lambda: engine.fail_node(cluster.id, huge, "stopped"),
        lambda: engine.fail_node(junk, 0, "stopped"),
        lambda: engine.set_capacity(accelerator=junk, location=junk),
        lambda: engine.set_balance(-huge),
        lambda: engine.advance(-huge),
        lambda: engine.rename(cluster.id, junk),
    ]
    for attempt in attempts:
        try:
            attempt()
        except e.ApiError as err:
            assert 400 <= err.status < 500, err
            assert err.message and len(err.message) < 600
        else:  # pragma: no cover - a silent accept would be a bug too
            pytest.fail("an absurd input was accepted")


# --- config -------------------------------------------------------------------------------


def test_config_profiles():
    fast, real = SimConfig.fast(), SimConfig.realistic()
    assert (fast.quote_ttl_seconds, fast.provision_seconds_per_node, fast.health_pass_seconds,
            fast.recovery_attempts_max, fast.recovery_node_seconds, fast.billing_increment,
            fast.payment_grace_seconds, fast.initial_balance_cents, fast.rate_limits,
            fast.retention_days) == (900, 5, 60, 3, 3, "hour", 3600, 10_000_000, False, 30)
    assert 300 <= real.provision_seconds_per_node <= 900 and real.rate_limits
    assert (real.recovery_node_seconds, real.terminate_seconds) == (60, 30)
    assert len(fast.availability) == 6 * 4
    with pytest.raises(ValueError):
        SimConfig(health_pass_seconds=0)
    with pytest.raises(ValueError):
        fast.quote_ttl_seconds = 1  # type: ignore[misc]


def test_realistic_profile_boot_times():
    clock = ManualClock(datetime(2026, 11, 29, 21, 30, tzinfo=UTC))
    engine = SimulatorEngine(SimConfig.realistic(), clock)
    cluster = launch(engine, quote(engine, nodes=2))
    engine.advance(420)
    assert engine.get_cluster(cluster.id).status is ClusterStatus.PROVISIONING
    engine.advance(420)
    assert engine.get_cluster(cluster.id).status is ClusterStatus.RUNNING
    assert "cluster.running" in event_types(engine, cluster.id)
