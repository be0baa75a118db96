from datetime import UTC, datetime, timedelta

import pytest

from bot.domain.models import ClusterState, NodeState, Observation
from bot.domain.readiness import (
    PRESETS,
    RESTART_SLACK,
    ReadinessState,
    ReadinessWatch,
    ServedSpan,
    after_observation,
    charges_until,
    deadline,
    parse_rule,
    role_word,
    waiting_cents,
)
from bot.domain.workload import WorkloadInvalid, parse_workload

READY = datetime(2026, 12, 1, 10, 0, 7, tzinfo=UTC)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_each_preset_matches_its_servers_line_and_not_a_boot_line(name):
    rule = parse_rule(name, all_ranks=False, limit_text="")
    assert not isinstance(rule, dict)
    samples = {
        "vllm": "INFO:     Application startup complete.",
        "sglang": "The server is fired up and ready to roll!",
        "torchrun": "NCCL INFO rendezvous with 10.65.0.2:29500 complete: rank 0 of 2",
        "slurm": "slurmctld: slurmctld version 23.02 started on cluster x",
        "ray": "Ray runtime started.",
    }
    assert rule.matches(samples[name])
    assert not rule.matches("node 0 booted; container starting")
    assert rule.limit_minutes == 45 and rule.ranks(4) == (0,)


@pytest.mark.parametrize(("text", "limit", "field"), [
    ("(unclosed", "", "readiness"), ("x" * 301, "", "readiness"), ("[a-", "", "readiness"),
    ("ok", "0", "readiness_limit"), ("ok", "abc", "readiness_limit"),
    ("ok", "99999999", "readiness_limit"), ("ok", "-5", "readiness_limit"),
])
def test_bad_rules_name_the_field(text, limit, field):
    errors = parse_rule(text, all_ranks=True, limit_text=limit)
    assert isinstance(errors, dict) and field in errors


def test_the_workload_carries_the_rule_or_a_field_error():
    w = parse_workload({"readiness": r"Uvicorn running on \S+", "readiness_all": True,
                        "readiness_limit": "90"})
    assert w.readiness is not None
    assert (w.readiness.all_ranks, w.readiness.limit_minutes) == (True, 90)
    assert w.readiness.ranks(3) == (0, 1, 2)
    assert parse_workload({"readiness_limit": "90"}).readiness is None  # no line, no check
    with pytest.raises(WorkloadInvalid) as caught:
        parse_workload({"readiness": "a(b", "name": "Bad Name"})
    assert set(caught.value.errors) == {"readiness", "name"}
    assert "`a(b`" in caught.value.errors["readiness"]


def test_waiting_bills_the_hour_marks_from_ready():
    assert charges_until(READY, READY) == 1  # the first hour is charged at ready
    assert charges_until(READY, READY + timedelta(minutes=59, seconds=59)) == 1
    assert charges_until(READY, READY + timedelta(hours=1)) == 2
    assert charges_until(READY, READY - timedelta(seconds=1)) == 0
    assert waiting_cents(ready_at=READY, until=READY + timedelta(hours=3, minutes=5),
                         hourly_cents=12_500) == 4 * 12_500


def test_deadline_and_roles():
    assert deadline(ready_at=READY, limit_minutes=45, prompts=0) == READY + timedelta(minutes=45)
    assert role_word("slurm_controller") == "Slurm controller"
    assert role_word("ray_worker") == "Ray worker"
    assert role_word("something_new") == "something_new"


def _watch(state, **changes):
    return ReadinessWatch(cluster_id="c", pattern="x", limit_minutes=30,
                          state=ReadinessState(state), updated_at=READY, **changes)


def _seen(status, *, episode=1, started=None, back=None):
    return Observation(status=ClusterState(status), episode=episode, episode_started_at=started,
                       nodes=(NodeState(rank=0, status="running"),
                              NodeState(rank=1, status="running" if back else "unhealthy",
                                        last_recovered_at=back)))


def test_a_lost_node_ends_serving_at_the_providers_instant():
    began, lost = READY + timedelta(minutes=2), READY + timedelta(minutes=50)
    changes = after_observation(_watch("serving", serving_at=began),
                                before=_seen("running", episode=0),
                                after=_seen("degraded", started=lost), nodes=2,
                                now=lost + timedelta(seconds=20))
    assert changes == {"state": ReadinessState.STOPPED,
                       "served": (ServedSpan(began=began, ended=lost),)}


def test_the_restart_arms_the_check_on_the_log_after_it_only():
    lost, back = READY + timedelta(minutes=50), READY + timedelta(minutes=55)
    stopped = _watch("stopped", serving_at=READY, all_ranks=True,
                     served=(ServedSpan(began=READY, ended=lost),), matched_ranks=(0, 1))
    changes = after_observation(stopped, before=_seen("degraded", started=lost),
                                after=_seen("running", started=lost, back=back), nodes=2,
                                now=back + timedelta(seconds=30))
    assert changes == {"state": ReadinessState.WATCHING, "rearmed_at": back,
                       "matched_ranks": (),
                       "cursors": {"0": back - RESTART_SLACK, "1": back - RESTART_SLACK},
                       "deadline_at": back + timedelta(minutes=30)}


def test_a_node_lost_and_back_between_two_polls_still_ends_serving():
    lost, back = READY + timedelta(minutes=50), READY + timedelta(minutes=51)
    changes = after_observation(_watch("serving", serving_at=READY),
                                before=_seen("running", episode=0),
                                after=_seen("running", started=lost, back=back), nodes=2,
                                now=back + timedelta(seconds=30))
    assert changes is not None
    assert changes["state"] is ReadinessState.WATCHING and changes["rearmed_at"] == back
    assert changes["served"] == (ServedSpan(began=READY, ended=lost),)


@pytest.mark.parametrize(("state", "status", "expected"), [
    ("watching", "degraded", None),  # never served: nothing ends, it keeps watching
    ("serving", "running", None),  # same episode, still running
    ("stopped", "degraded", None),  # still down
    ("stopped", "terminated", "ended"),
])
def test_other_observations(state, status, expected):
    changes = after_observation(_watch(state, serving_at=READY), before=_seen("degraded"),
                                after=_seen(status), nodes=2, now=READY)
    assert (changes or {}).get("state") == expected


def test_not_serving_spans_cover_before_the_line_and_each_outage():
    t = [READY + timedelta(hours=h) for h in range(8)]
    watch = _watch("serving", serving_at=t[5], served=(ServedSpan(began=t[1], ended=t[3]),))
    assert watch.not_serving(ready_at=t[0], end=t[7]) == [(t[0], t[1]), (t[3], t[5])]
    stopped = _watch("stopped", serving_at=t[1], served=(ServedSpan(began=t[1], ended=t[3]),))
    assert stopped.not_serving(ready_at=t[0], end=t[7]) == [(t[0], t[1]), (t[3], t[7])]
    assert _watch("watching").not_serving(ready_at=t[0], end=t[2]) == [(t[0], t[2])]
