"""The envelope property (issue 8): billed hours ≤ approved hours whenever enforcement is on,
over random envelopes, ready times, poll intervals, sweep durations, clock error and provider
latency — billed by the simulator's engine. Seeded (hypothesis is not a dependency); the figure
is printed (`pytest -s`) and `python -m benchmarks envelope` reports it for 1,000 cases each."""

import sys
from datetime import timedelta

import pytest

from benchmarks.envelope import run_cases
from bot.domain.envelope import FINAL_WARNING, margin_for, milestones, next_stage
from tests.domain import HOUR, NOW, make_cluster

CASES = 300


@pytest.mark.parametrize("seed", [1, 2])
def test_enforced_envelopes_are_never_billed_beyond_the_approved_hours(seed, capsys):
    figures = run_cases(CASES, seed=seed)
    with capsys.disabled():
        sys.stdout.write(f"\nenvelope property (seed {seed}): {figures.tried} cases tried, "
                         f"max billed − approved = {figures.max_over} h\n")
    assert figures.tried == CASES
    assert figures.max_over == 0 and figures.over_cases == 0
    assert figures.unwarned == 0  # the owner and approvers were told before every termination


def test_without_enforcement_the_prompt_always_precedes_the_next_charge():
    figures = run_cases(CASES // 2, seed=3, enforce=False)
    assert figures.prompts_late == 0


def test_the_property_can_fail_a_provider_slower_than_the_allowance_overshoots():
    # The check is real: with terminations landing 3–15 min late, some clusters bill hour H + 1.
    figures = run_cases(100, seed=4, slow_provider=True)
    assert figures.max_over == 1 and figures.over_cases > 0


RUNNING = make_cluster(ready_at=NOW, lifetime_hours=4)  # hour 5 is charged at NOW + 4 h
MARGIN = margin_for(timedelta(seconds=30))


def stage_at(offset, *, stage="none", enforce=True, lifetime=4):
    record = RUNNING.model_copy(update={"envelope_stage": stage, "lifetime_hours": lifetime})
    return next_stage(record, now=NOW + offset, enforce=enforce, margin=MARGIN)


def test_the_stages_of_an_enforced_envelope_in_time():
    assert timedelta(minutes=3, seconds=30) == MARGIN
    assert stage_at(3 * HOUR - timedelta(seconds=1)) is None
    assert stage_at(3 * HOUR) == "final"  # an hour before hour 5 is charged …
    assert stage_at(3.2 * HOUR, stage="final") is None  # … so the 80 % note is not needed
    assert stage_at(4 * HOUR - MARGIN - timedelta(seconds=1), stage="final") is None
    assert stage_at(4 * HOUR - MARGIN, stage="final") == "enforced"
    assert stage_at(5 * HOUR) == "enforced"  # a sweep that missed the others goes furthest
    assert stage_at(5 * HOUR, stage="enforced") is None


def test_a_long_envelope_warns_at_80_percent_first_and_prompts_before_the_charge():
    assert stage_at(8 * HOUR, lifetime=10) == "warned"
    assert stage_at(9 * HOUR, stage="warned", lifetime=10) == "final"
    unenforced = timedelta(hours=10) - MARGIN
    assert stage_at(unenforced, stage="warned", enforce=False, lifetime=10) == "due"
    assert stage_at(unenforced - timedelta(seconds=1), stage="warned", enforce=False,
                    lifetime=10) is None


def test_a_margin_longer_than_the_warning_still_warns_before_terminating():
    record = RUNNING.model_copy(update={"lifetime_hours": 2})
    wide = margin_for(timedelta(hours=1))
    [(_, warn), (_, final), (_, enforced)] = milestones(record, enforce=True, margin=wide)
    assert enforced == NOW + 2 * HOUR - wide
    assert final == enforced - 2 * HOUR < NOW + 2 * HOUR - FINAL_WARNING  # two polls before
    assert warn == NOW + 1.6 * HOUR


def test_no_envelope_or_not_billing_means_no_stage():
    assert next_stage(make_cluster(lifetime_hours=None), now=NOW + 99 * HOUR, enforce=True,
                      margin=MARGIN) is None
    from bot.domain.models import ClusterState
    stopped = RUNNING.model_copy(update={"status": ClusterState.TERMINATING})
    assert next_stage(stopped, now=NOW + 99 * HOUR, enforce=True, margin=MARGIN) is None
