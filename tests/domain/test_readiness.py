from datetime import UTC, datetime, timedelta

import pytest

from bot.domain.readiness import (
    PRESETS,
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
