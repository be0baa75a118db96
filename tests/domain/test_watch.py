"""What a degraded episode cost: the hour anchors inside it, from the cluster's own fields."""

from datetime import UTC, datetime, timedelta

from bot.domain.models import ClusterState, NodeState, Observation
from bot.domain.watch import NoticeKind, episode_charges, notices_between

READY = datetime(2026, 11, 30, 10, 0, 7, tzinfo=UTC)
H = timedelta(hours=1)


def test_a_minute_between_two_anchors_holds_no_charge():
    start = READY + 2 * H + timedelta(minutes=10)
    assert episode_charges(ready_at=READY, started=start, ended=start + timedelta(minutes=1)) == 0


def test_the_anchor_at_the_start_is_inside_the_one_at_the_end_is_not():
    assert episode_charges(ready_at=READY, started=READY + H, ended=READY + 2 * H) == 1
    assert episode_charges(ready_at=READY, started=READY + H - timedelta(seconds=1),
                           ended=READY + 3 * H + timedelta(seconds=1)) == 3


def test_unknown_bounds_give_none():
    assert episode_charges(ready_at=None, started=READY, ended=READY + H) is None
    assert episode_charges(ready_at=READY, started=None, ended=READY + H) is None


def _obs(status, *, episode=1, started=None, back=None, accrued=0):
    return Observation(status=status, episode=episode, episode_started_at=started,
                       nodes=(NodeState(rank=0, status="running"),
                              NodeState(rank=1, status="running", last_recovered_at=back)),
                       accrued_cents=accrued)


def test_recovered_notice_counts_the_anchors_not_the_polled_figures():
    # Degraded at 11:50:07, back at 12:10:07; the bot polls at 12:30, long after a second
    # charge (13:00:07 has not come yet). Polled figures would depend on when the bot looked;
    # the anchors say one charge (12:00:07) fell inside the episode.
    started, back = READY + H + timedelta(minutes=50), READY + 2 * H + timedelta(minutes=10)
    before = _obs(ClusterState.DEGRADED, started=started, accrued=2 * 6253)
    after = _obs(ClusterState.RUNNING, started=started, back=back, accrued=3 * 6253)
    notices = notices_between(before, after, cluster_id="c", now=back + timedelta(minutes=20),
                              terminated_by_bot=False, manual_attempts=frozenset(),
                              ready_at=READY, hourly_cents=6253)
    recovered = [n for n in notices if n.kind is NoticeKind.RECOVERED]
    assert len(recovered) == 1
    facts = recovered[0].facts
    assert facts.degraded_charges == 1 and facts.degraded_cost_cents == 6253
    assert facts.degraded_seconds == 20 * 60  # until the last node was back, not the poll


def test_uncharged_marks_are_carried_and_taken_off_the_episode():
    # Every node down from 10:30:07 to 12:40:07: the marks at 11:00:07 and 12:00:07 pass
    # uncharged (§5.3); the provider's count of uncharged marks says so, poll by poll.
    from bot.domain.watch import carry
    started, back = READY + H / 2, READY + 2 * H + timedelta(minutes=40)
    running = Observation(status=ClusterState.RUNNING, accrued_hours=1, skipped_charges=0,
                          next_accrual_at=READY + H)
    down1 = carry(running, _obs(ClusterState.DEGRADED, started=started).model_copy(
        update={"accrued_hours": 1, "skipped_charges": 1, "next_accrual_at": READY + 2 * H}))
    assert down1.skipped_marks == (READY + H,)
    down2 = carry(down1, down1.model_copy(update={"skipped_charges": 2,
                                                  "next_accrual_at": READY + 3 * H,
                                                  "skipped_marks": ()}))
    assert down2.skipped_marks == (READY + H, READY + 2 * H)
    after = carry(down2, _obs(ClusterState.RUNNING, started=started, back=back).model_copy(
        update={"accrued_hours": 1, "skipped_charges": 2, "next_accrual_at": READY + 3 * H}))
    notices = notices_between(down2, after, cluster_id="c", now=back, terminated_by_bot=False,
                              manual_attempts=frozenset(), ready_at=READY, hourly_cents=6253)
    facts = next(n for n in notices if n.kind is NoticeKind.RECOVERED).facts
    assert facts.degraded_charges == 0 and facts.degraded_cost_cents == 0
    ended = carry(after, Observation(status=ClusterState.TERMINATED))  # no nextAccrualAt now
    assert ended.skipped_marks == (READY + H, READY + 2 * H)


def test_a_poll_spanning_a_whole_outage_puts_the_uncharged_marks_inside_it():
    """The bot sees the cluster before and after an outage (restarted, or a long poll gap):
    every node down 11:30–13:30, so 12:00 and 13:00 went uncharged, and 14:00 was charged.
    The uncharged marks are those inside the episode, not the latest ones; the recovered notice
    then says the outage cost nothing (it said "$62.43: 1 hourly charge")."""
    from bot.domain.watch import carry
    started, back = READY + H + H / 2, READY + 3 * H + H / 2
    before = Observation(status=ClusterState.RUNNING, accrued_hours=2, skipped_charges=0,
                         next_accrual_at=READY + 2 * H)
    after = carry(before, _obs(ClusterState.RUNNING, started=started, back=back).model_copy(
        update={"accrued_hours": 3, "skipped_charges": 2, "next_accrual_at": READY + 5 * H,
                "nodes": (NodeState(rank=0, status="running", last_recovered_at=back),
                          NodeState(rank=1, status="running", last_recovered_at=back))}))
    assert after.skipped_marks == (READY + 2 * H, READY + 3 * H)
    notices = notices_between(before, after, cluster_id="c", now=READY + 4 * H + H / 2,
                              terminated_by_bot=False, manual_attempts=frozenset(),
                              ready_at=READY, hourly_cents=6253)
    facts = next(n for n in notices if n.kind is NoticeKind.RECOVERED).facts
    assert facts.degraded_charges == 0 and facts.degraded_cost_cents == 0
