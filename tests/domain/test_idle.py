"""Idle rules, pure: the form's fields, the presets, the patterns RE2 refuses, the money."""

import time
from datetime import UTC, datetime, timedelta

import pytest

from bot.domain.idle import (
    DONE_PRESETS,
    parse_idle,
    quiet_fired,
    warn_at,
)
from bot.domain.models import IdleRule
from bot.domain.patterns import MATCH_CHARS, problem, search
from bot.domain.readiness import parse_rule
from bot.domain.workload import WorkloadInvalid, parse_workload

T0 = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)


def test_a_rule_from_the_form():
    rule = parse_idle("30", "training", all_ranks=True)
    assert rule == IdleRule(quiet_minutes=30, all_ranks=True, done="Training completed")
    assert rule.ranks(3) == (0, 1, 2)
    assert parse_idle("", "", all_ranks=False) is None  # nothing asked: no rule
    assert parse_idle("", r"loss=nan", all_ranks=False) == IdleRule(done="loss=nan")
    assert parse_idle("5", "", all_ranks=False).quiet_minutes == 5
    assert parse_idle("1440", "", all_ranks=False).quiet_minutes == 1440


@pytest.mark.parametrize(("minutes", "done", "field", "words"), [
    ("4", "", "idle_minutes", "5 to 1440"),
    ("1441", "", "idle_minutes", "5 to 1440"),
    ("-5", "", "idle_minutes", "whole number"),
    ("half an hour", "", "idle_minutes", "whole number"),
    ("", "Training (completed", "idle_done", "not a valid pattern"),
    ("", r"(step \d+)\1", "idle_done", "super-linear"),
    ("", r"(?=done)", "idle_done", "super-linear"),
    ("", r"(?<!not )done", "idle_done", "super-linear"),
    ("", "x" * 301, "idle_done", "at most 300"),
])
def test_bad_input_names_the_field(minutes, done, field, words):
    errors = parse_idle(minutes, done, all_ranks=False)
    assert isinstance(errors, dict) and set(errors) == {field}, errors
    assert words in errors[field]
    with pytest.raises(WorkloadInvalid) as caught:  # the form: refused, with the reason
        parse_workload({"idle_minutes": minutes, "idle_done": done})
    assert set(caught.value.errors) == {field}


def test_presets_match_what_the_tools_print():
    samples = {
        "torchrun": "[INFO] torch.distributed.elastic.agent.server.api: [default] Local worker "
                    "group finished (WorkerState.SUCCEEDED). Waiting 300 seconds",
        "training": "Training completed. Do not forget to share your model on huggingface.co",
        "slurm": "slurmctld: _job_complete: JobId=4211 done",
        "ray": "------------------------------------------\nJob 'raysubmit_x1Yz' succeeded",
    }
    assert set(samples) == set(DONE_PRESETS)
    for name, line in samples.items():
        pattern = DONE_PRESETS[name][1]
        assert problem(pattern) is None
        assert search(pattern, line), name
        assert not search(pattern, "epoch 3 step 100 loss=1.2"), name


def test_a_nested_quantifier_runs_in_linear_time():
    """`(a+)+b` backtracks exponentially in Python's re; under RE2 it is linear, so it is
    allowed, and a line of 10,000 `a`s takes no time (only MATCH_CHARS of it is seen)."""
    assert problem(r"(a+)+b") is None
    started = time.perf_counter()
    for _ in range(200):
        assert not search(r"(a+)+b", "a" * 10_000)
        assert not search(r"(x+x+)+y", "x" * 5_000)
    assert time.perf_counter() - started < 2.0
    assert search("tail", "a" * MATCH_CHARS + "tail") is False  # past the cut: unseen


def test_readiness_patterns_go_through_the_same_engine():
    assert isinstance(parse_rule(r"(?=Uvicorn)", all_ranks=False, limit_text=""), dict)
    assert not isinstance(parse_rule(r"Uvicorn running on \S+", all_ranks=False,
                                     limit_text=""), dict)


def test_quiet_rule_fires_after_n_minutes_without_a_line():
    rule = IdleRule(quiet_minutes=20)
    assert quiet_fired(rule, last_line_at=T0, now=T0 + timedelta(minutes=19)) is None
    fired = quiet_fired(rule, last_line_at=T0, now=T0 + timedelta(minutes=20))
    assert fired is not None and fired.since == T0 and fired.reason == "quiet"
    assert quiet_fired(IdleRule(done="x"), last_line_at=T0, now=T0 + timedelta(days=1)) is None


def test_the_warning_comes_before_the_terminate():
    fired = T0
    assert warn_at(fired + timedelta(minutes=15), fired) == fired + timedelta(minutes=7.5)
    assert warn_at(fired + timedelta(minutes=60), fired) == fired + timedelta(minutes=50)
