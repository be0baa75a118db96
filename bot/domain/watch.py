"""What the watcher sees, what it says, and when: pure functions of two observations.

Each poll turns the provider's cluster into an `Observation`. `notices_between(before, after)`
lists what changed as `Notice`s, each with a `key` that names the transition itself (the
degraded notice of episode 3, attempt 2 of episode 3 started, node 1 recovered at 10:42 …).
The key is stored unique per cluster, so a transition seen again — on the next poll, after a
restart, or by a second replica — is never announced twice, and a node that flaps inside one
poll interval is one episode, announced once.
"""

from __future__ import annotations

import enum
from datetime import datetime

from bot.domain.models import ClusterState, Frozen, Observation
from bot.domain.spend import HOUR, accruals_before


class NoticeKind(enum.StrEnum):
    DEGRADED = "degraded"
    RECOVERY_STARTED = "recovery_started"
    NODE_RECOVERED = "node_recovered"
    NODE_SKIPPED = "node_skipped"
    RECOVERED = "recovered"
    EXHAUSTED = "exhausted"
    FAILED = "failed"
    GRACE_TERMINATED = "grace_terminated"
    TERMINATED_OUTSIDE = "terminated_outside"
    REMINDER = "reminder"  # a DM to the owner (the approvers while nobody owns it)
    RECEIPT = "receipt"  # what it cost, who asked, who approved — once it is terminated
    PAST_DUE = "past_due"  # the account can't pay: the grace deadline (bot/domain/payment.py)
    GRACE_ENDING = "grace_ending"  # … and a reminder before it ends
    SERVING = "serving"  # the readiness line appeared (bot/domain/readiness.py): once
    NOT_SERVING = "not_serving"  # a DM to the owner: the limit passed without it
    # The provider lists it but the bot can't parse it (bot/services/unreadable.py): the
    # owner and the approvals channel, once per episode; then a line in its thread when it
    # reads again.
    UNREADABLE = "unreadable"
    READABLE_AGAIN = "readable_again"
    IDLE = "idle"  # a DM to the owner: an idle rule fired (bot/domain/idle.py), once an episode
    IDLE_WARNING = "idle_warning"  # in its thread: the policy terminates it soon unless kept

    @property
    def broadcast(self) -> bool:
        """Also shown in the channel, not only in the cluster's thread (needs someone now)."""
        return self in (NoticeKind.DEGRADED, NoticeKind.EXHAUSTED, NoticeKind.GRACE_TERMINATED)


class NoticeFacts(Frozen):
    """What a notice says; rendered by bot/slack/blocks/notices.py."""

    episode: int = 0
    down_ranks: tuple[int, ...] = ()
    rank: int | None = None
    attempt: int | None = None
    attempts_max: int | None = None
    manual: bool | None = None
    auto_recovery: bool = False
    degraded_seconds: int | None = None
    degraded_cost_cents: int | None = None
    degraded_charges: int | None = None  # hourly charges AI Reserve made inside the episode
    accrued_cents: int = 0
    termination_reason: str | None = None
    hour: int | None = None  # REMINDER: the accrued hour it is about
    running_seconds: int | None = None  # REMINDER: since readyAt
    grace_ends_at: datetime | None = None  # PAST_DUE, GRACE_ENDING: AI Reserve terminates then
    unpaid_cents: int | None = None  # PAST_DUE, GRACE_ENDING, GRACE_TERMINATED: owed for it
    # SERVING, NOT_SERVING: seconds from ready, what those hour marks billed, the last lines.
    waited_seconds: int | None = None
    waiting_cents: int | None = None
    waiting_charges: int | None = None
    log_lines: tuple[str, ...] = ()
    prompt: int | None = None  # NOT_SERVING: which time the owner is asked (Keep waiting's ref)
    # SERVING / NOT_SERVING after a lost node: when it stopped serving and when every node ran
    # again (waited_seconds then counts from the restart, waiting_* is what the outage billed).
    stopped_at: datetime | None = None
    restarted_at: datetime | None = None
    # DEGRADED, RECOVERED: the provider's episode (its start, the last node back), not the
    # moments the bot polled — what the billed-hours chart colours.
    episode_started_at: datetime | None = None
    episode_ended_at: datetime | None = None
    unreadable_field: str | None = None  # UNREADABLE: the first field that did not parse
    unreadable_since: datetime | None = None  # UNREADABLE, READABLE_AGAIN: the episode's start
    # IDLE, IDLE_WARNING (also waited_seconds, waiting_*, log_lines, prompt = the episode):
    # since when, why ("done" with its line, or "quiet"), and when the policy terminates it.
    idle_since: datetime | None = None
    idle_reason: str | None = None
    idle_line: str | None = None
    terminate_at: datetime | None = None
    keep_hours: int | None = None


class Notice(Frozen):
    """One transition to announce. `key` is unique per cluster: the exactly-once guard."""

    cluster_id: str
    key: str
    kind: NoticeKind
    facts: NoticeFacts
    created_at: datetime
    delivered_at: datetime | None = None


def episode_charges(*, ready_at: datetime | None, started: datetime | None,
                    ended: datetime | None) -> int | None:
    """How many hourly charges AI Reserve made inside a degraded episode [started, ended).

    A cluster is charged one whole hour at each anchor `ready_at + k·1 h` (contract §5.3), also
    while degraded; so the episode cost the anchors that fall inside it — from the cluster's own
    fields, never a difference of two polled figures (a charge landing between the provider's
    change and the bot's poll would fall on the wrong side). An anchor at the very instant the
    episode started is inside it (the provider changes state before it charges); one at the
    instant it recovered is not. None when a bound is unknown.
    """
    if ready_at is None or started is None or ended is None or ended < started:
        return None
    return accruals_before(ready_at, ended) - accruals_before(ready_at, started)


def carry(before: Observation | None, after: Observation) -> Observation:
    """`after` with the uncharged hour marks carried from the previous poll, plus those the
    provider passed since (its count of uncharged marks grew by as many).

    The new ones are marks since the previous poll at which every node can have been down:
    inside the current degraded episode (from its start) and before the first node that runs
    now came back — exact whenever polls are less than an hour apart, and whenever one episode
    spans the poll's marks (a poll spanning a whole outage, e.g. after a restart). Otherwise
    the latest marks before `nextAccrualAt` are taken."""
    known = before.skipped_marks if before is not None else ()
    if after.skipped_charges is None or after.next_accrual_at is None:
        return after.model_copy(update={"skipped_marks": known})
    new = after.skipped_charges - len(known)
    if new <= 0:
        return after.model_copy(update={"skipped_marks": known})
    nxt = after.next_accrual_at
    # Every mark from readyAt (charged or not) to nextAccrualAt, less those seen before.
    since = before.next_accrual_at if before is not None else None
    total = after.accrued_hours + after.skipped_charges
    passed = [m for m in (nxt - HOUR * j for j in range(1, total + 1))
              if (since is None or m >= since) and m not in known]
    if len(passed) < new:  # the polls disagree with themselves: the latest marks, as before
        passed = [nxt - HOUR * j for j in range(1, new + 1)]
    start = after.episode_started_at
    up = [n.last_recovered_at for n in after.nodes if n.status == "running"]
    back = min((at for at in up if at is not None and (start is None or at >= start)),
               default=None) if up else None
    down = [m for m in passed if (start is None or m >= start) and (back is None or m < back)]
    if up and back is None:
        down = []  # a node ran through the whole episode: no mark in it was all-down
    chosen = sorted(down, reverse=True)[:new]
    chosen += [m for m in passed if m not in chosen][:new - len(chosen)]
    return after.model_copy(update={"skipped_marks": (*known, *sorted(chosen))})


def recovered_at(after: Observation, *, fallback: datetime) -> datetime:
    """When the episode ended: the last node's `lastRecoveredAt` (the cluster turns `running`
    the moment its last down node is back), else `fallback` (the poll that saw it)."""
    started = after.episode_started_at
    back = [n.last_recovered_at for n in after.nodes if n.last_recovered_at is not None
            and (started is None or n.last_recovered_at >= started)]
    return max(back) if back else fallback


def notices_between(before: Observation | None, after: Observation, *, cluster_id: str,
                    now: datetime, terminated_by_bot: bool, manual_attempts: frozenset[int],
                    ready_at: datetime | None = None,
                    hourly_cents: int | None = None) -> list[Notice]:
    """Every transition from `before` to `after`, oldest first.

    `manual_attempts` are the attempt numbers (of the current episode) the bot itself asked
    for; `ready_at` and `hourly_cents` (the cluster's readyAt and locked rate) let the recovered
    notice say what the degraded time cost: the charges AI Reserve made inside the episode.
    """
    prior = before or Observation(status=ClusterState.PROVISIONING)
    same_episode = prior.episode == after.episode
    out: list[Notice] = []

    def add(key: str, kind: NoticeKind, **facts: object) -> None:
        out.append(Notice(cluster_id=cluster_id, key=key, kind=kind, created_at=now,
                          facts=NoticeFacts(episode=after.episode,
                                            accrued_cents=after.accrued_cents,
                                            auto_recovery=after.auto_recovery,
                                            **facts)))

    if after.status is ClusterState.FAILED and prior.status is not ClusterState.FAILED:
        add("failed", NoticeKind.FAILED)
    if after.episode > prior.episode:
        add(f"degraded:{after.episode}", NoticeKind.DEGRADED, down_ranks=after.down_ranks
            or prior.down_ranks, episode_started_at=after.episode_started_at)
    if after.episode:
        first = prior.attempts_started + 1 if same_episode else 1
        for attempt in range(first, after.attempts_started + 1):
            add(f"attempt:{after.episode}:{attempt}", NoticeKind.RECOVERY_STARTED,
                attempt=attempt, attempts_max=after.attempts_max,
                manual=attempt in manual_attempts)
        earlier = {n.rank: n.last_recovered_at for n in prior.nodes}
        for node in after.nodes:
            if node.last_recovered_at and node.last_recovered_at != earlier.get(node.rank):
                add(f"node_recovered:{node.rank}:{node.last_recovered_at.isoformat()}",
                    NoticeKind.NODE_RECOVERED, rank=node.rank)
        # A skip is reported when its attempt ends: the provider lists the ranks it gave up on.
        finished_before = prior.attempts_used if same_episode else 0
        for attempt in range(finished_before + 1, after.attempts_used + 1):
            for rank in after.skipped:
                add(f"node_skipped:{after.episode}:{attempt}:{rank}", NoticeKind.NODE_SKIPPED,
                    rank=rank, attempt=attempt)
    was_degraded = prior.status is ClusterState.DEGRADED or after.episode > prior.episode
    if was_degraded and after.episode and after.status is ClusterState.RUNNING:
        started = after.episode_started_at or prior.episode_started_at
        back_at = recovered_at(after, fallback=now)
        charges = episode_charges(ready_at=ready_at, started=started, ended=back_at)
        if charges is not None and started is not None:
            # Hour marks that fell while every node was down were not charged (§5.3).
            charges -= sum(1 for mark in after.skipped_marks if started <= mark < back_at)
        add(f"recovered:{after.episode}", NoticeKind.RECOVERED,
            degraded_seconds=int((back_at - started).total_seconds()) if started else None,
            degraded_charges=charges, episode_started_at=started, episode_ended_at=back_at,
            degraded_cost_cents=(charges * hourly_cents
                                 if charges is not None and hourly_cents is not None else None))
    if after.recovery_state == "exhausted" and (prior.recovery_state != "exhausted"
                                                or not same_episode):
        add(f"exhausted:{after.episode}", NoticeKind.EXHAUSTED,
            attempts_max=after.attempts_max, down_ranks=after.down_ranks)
    ended = (ClusterState.TERMINATING, ClusterState.TERMINATED)
    if after.status in ended and prior.status not in ended:
        if after.termination_reason == "payment_grace_expired":
            add("terminated", NoticeKind.GRACE_TERMINATED,
                termination_reason=after.termination_reason, unpaid_cents=after.unpaid_cents)
        elif not terminated_by_bot:
            add("terminated", NoticeKind.TERMINATED_OUTSIDE,
                termination_reason=after.termination_reason)
    if after.status is ClusterState.TERMINATED and prior.status is not ClusterState.TERMINATED:
        add("receipt", NoticeKind.RECEIPT, termination_reason=after.termination_reason)
    return out


def reminder_hour(after: Observation, *, last_reminded_hours: int) -> int | None:
    """The accrued hour to remind the owner of now, if any.

    The first hour accrues at `readyAt`; a reminder follows each *further* hour the provider
    accrues (readyAt 10:00 → 11:00, 12:00 …). A bot that was down for hours reminds once, of
    the latest hour, never of each one it missed; and never of an hour already reminded.
    """
    if after.status not in (ClusterState.RUNNING, ClusterState.DEGRADED):
        return None
    if after.accrued_hours >= 2 and after.accrued_hours > last_reminded_hours:
        return after.accrued_hours
    return None
