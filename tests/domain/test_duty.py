"""When a degraded episode is escalated (bot/domain/duty.py), and what it has cost so far."""

from datetime import UTC, datetime, timedelta

import pytest

from bot.domain.duty import Duty, Escalation, escalation_due, lost_cents
from bot.domain.models import ClusterRecord, ClusterState, Observation, ShapeSpec

READY = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
START = READY + timedelta(minutes=20)  # the episode began 20 min after readyAt
AFTER = timedelta(minutes=30)


def _cluster(*, status=ClusterState.DEGRADED, state="idle", manual=(), hours=1,
             skipped=()) -> ClusterRecord:
    observed = Observation(status=status, episode=2, attempts_max=3, recovery_state=state,
                           episode_started_at=START, skipped_marks=skipped)
    return ClusterRecord(id="clu_1", request_id=None, owner_id="U1", channel_id="C1",
                         name=None, shape=ShapeSpec(accelerator="h100", gpus_per_node=8, nodes=2),
                         accelerator_name="H100", location="us-tx", hourly_cents=12485,
                         status=status, created_at=READY, updated_at=READY, ready_at=READY,
                         accrued_hours=hours, accrued_cents=hours * 12485, observed=observed,
                         manual_recoveries=manual)


def due(c, duty=None, minutes=31):
    return escalation_due(c, duty, after=AFTER, now=START + timedelta(minutes=minutes))


@pytest.mark.parametrize(("cluster", "duty", "minutes", "expected"), [
    (_cluster(), None, 29, None),  # not yet
    (_cluster(), None, 31, Escalation.OVERDUE),
    (_cluster(status=ClusterState.RUNNING), None, 31, None),  # recovered
    (_cluster(status=ClusterState.TERMINATED), None, 31, None),
    (_cluster(manual=("2:1",)), None, 31, None),  # someone recovered by hand this episode
    (_cluster(manual=("1:1",)), None, 31, Escalation.OVERDUE),  # … an earlier episode
    (_cluster(), Duty(cluster_id="clu_1", episode=2, acknowledged_by="U2"), 31, None),
    (_cluster(), Duty(cluster_id="clu_1", episode=2, escalated_at=START), 31, None),
    (_cluster(), Duty(cluster_id="clu_1", episode=2, snoozed_by="U1",
                      snoozed_until=START + timedelta(minutes=60)), 59, None),
    (_cluster(), Duty(cluster_id="clu_1", episode=2, snoozed_by="U1",
                      snoozed_until=START + timedelta(minutes=60)), 61, Escalation.OVERDUE),
    (_cluster(state="exhausted"), None, 1, Escalation.EXHAUSTED),  # at once
    (_cluster(state="exhausted"), Duty(cluster_id="clu_1", episode=2, escalated_at=START),
     1, Escalation.EXHAUSTED),
    (_cluster(state="exhausted"), Duty(cluster_id="clu_1", episode=2,
                                       exhausted_escalated_at=START), 90, None),
    (_cluster(state="exhausted", manual=("2:1", "2:2", "2:3")), None, 1, Escalation.EXHAUSTED),
])
def test_escalation_due(cluster, duty, minutes, expected):
    assert due(cluster, duty, minutes) is expected


def test_money_lost_is_the_charges_inside_the_episode_at_the_locked_rate():
    # 10:20 degraded; the 11:00 mark was charged (2 hours accrued): one charge inside it.
    assert lost_cents(_cluster(hours=2), now=READY + timedelta(minutes=70)) == (12485, 1)
    # Before 11:00 nothing was charged inside it (the 10:00 hour was paid before).
    assert lost_cents(_cluster(hours=1), now=READY + timedelta(minutes=50)) == (0, 0)
    # 11:00 passed with every node down: not charged, not lost.
    skipped = (READY + timedelta(hours=1),)
    assert lost_cents(_cluster(hours=1, skipped=skipped),
                      now=READY + timedelta(minutes=70)) == (0, 0)
