from datetime import UTC, datetime

import pytest

from bot.domain.models import ClusterRecord, ClusterState, Observation, ShapeSpec
from bot.domain.recovery import attempts, exhausted, exhausted_refusal

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _cluster(status: ClusterState, **changes) -> ClusterRecord:
    return ClusterRecord(id="clu_1", request_id=None, owner_id="U1", channel_id="C1", name=None,
                         shape=ShapeSpec(accelerator="h100", gpus_per_node=8, nodes=2),
                         accelerator_name="H100", location="us-tx", hourly_cents=12485,
                         status=status, created_at=NOW, updated_at=NOW, **changes)


def _seen(state: str, used: int = 3) -> Observation:
    return Observation(status=ClusterState.DEGRADED, episode=2, attempts_used=used,
                       attempts_max=3, recovery_state=state)


@pytest.mark.parametrize(("status", "observed", "last_error", "expected"), [
    (ClusterState.DEGRADED, _seen("exhausted"), "recovery_exhausted", True),
    (ClusterState.DEGRADED, None, "recovery_exhausted", True),  # not polled yet: the error
    (ClusterState.DEGRADED, _seen("idle", used=1), "recovery_exhausted", False),  # new episode
    (ClusterState.RUNNING, _seen("exhausted"), None, False),  # it healed: the episode ended
    (ClusterState.TERMINATED, _seen("exhausted"), "recovery_exhausted", False),
])
def test_exhausted_only_while_degraded_with_every_attempt_spent(status, observed, last_error,
                                                               expected):
    c = _cluster(status, observed=observed, last_error=last_error)
    assert exhausted(c) is expected


def test_the_refusal_says_why_and_the_way_out():
    c = _cluster(ClusterState.DEGRADED, observed=_seen("exhausted"))
    assert attempts(c) == (3, 3)
    text = exhausted_refusal(c, asked="Another recovery attempt")
    assert "is spent (3 of 3)" in text and "AI Reserve makes no more" in text
    assert "Another recovery attempt would change nothing, so nothing was changed" in text
    assert "$124.85 per hour" in text and "`/cluster terminate clu_1`" in text
