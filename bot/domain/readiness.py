"""Readiness, the docs' way: `running` is infrastructure only, so the bot watches the workload's
own log for a line that says it serves (pure: rules, presets, validation, what waiting cost).

A rule is a line pattern (a Python regex, searched in each log line) that rank 0 prints — or
every rank, when asked — once the workload serves, and a limit after which the owner is asked
whether to keep waiting. Money follows the provider's hour marks: one charge at readyAt + k·1 h
(the first at readyAt), as the rest of the bot counts (bot/domain/spend.py).
"""

from __future__ import annotations

import enum
from datetime import datetime, timedelta
from typing import Any

from pydantic import Field

from bot.domain.idle import IdleState
from bot.domain.models import (
    DEFAULT_LIMIT_MINUTES,
    ClusterRecord,
    ClusterState,
    Frozen,
    IdleRule,
    Observation,
    ReadinessRule,
)
from bot.domain.patterns import MAX_PATTERN, problem
from bot.domain.spend import HOUR, charge_instants, uncharged_marks
from bot.domain.watch import recovered_at

MAX_LIMIT_MINUTES = 7 * 24 * 60
__all__ = ["MAX_PATTERN"]  # kept importable from here for older callers

# name → (what it is, the pattern). Each is a line the tool prints once it serves / has met.
PRESETS: dict[str, tuple[str, str]] = {
    "vllm": ("vLLM (OpenAI server)", r"Application startup complete"),
    "sglang": ("SGLang", r"The server is fired up"),
    "torchrun": ("torchrun / NCCL rendezvous", r"rendezvous .* complete"),
    "slurm": ("Slurm controller", r"slurmctld.*(started|ready)|All nodes are idle"),
    "ray": ("Ray head", r"Ray runtime started"),
}


def parse_rule(text: str, *, all_ranks: bool, limit_text: str) -> ReadinessRule | dict[str, str]:
    """The form's readiness fields → a rule, or `{field: message}` naming what is wrong.

    `text` is a preset name (`vllm`, `sglang`, `torchrun`, `slurm`, `ray`) or a pattern."""
    errors: dict[str, str] = {}
    text = text.strip()
    pattern = PRESETS[text.lower()][1] if text.lower() in PRESETS else text
    why = problem(pattern)  # RE2: linear time, or refused here (bot/domain/patterns.py)
    if why is not None:
        errors["readiness"] = (f"{why} Escape special characters with `\\`, or pick a preset "
                               f"({', '.join(PRESETS)}).")
    limit = DEFAULT_LIMIT_MINUTES
    if limit_text.strip():
        raw = limit_text.strip()
        if not raw.isdigit() or not 1 <= int(raw) <= MAX_LIMIT_MINUTES:
            errors["readiness_limit"] = (f"`{raw[:20]}`: a whole number of minutes, 1 to "
                                         f"{MAX_LIMIT_MINUTES}, e.g. `45`.")
        else:
            limit = int(raw)
    if errors:
        return errors
    return ReadinessRule(pattern=pattern, all_ranks=all_ranks, limit_minutes=limit)


def preset_name(pattern: str) -> str | None:
    return next((label for label, p in PRESETS.values() if p == pattern), None)


def charges_until(ready_at: datetime, when: datetime) -> int:
    """Hour marks readyAt + k·1 h at or before `when`: what was billed by then (≥ 1 at ready)."""
    if when < ready_at:
        return 0
    return int((when - ready_at) // HOUR) + 1


def waiting_cents(*, ready_at: datetime, until: datetime, hourly_cents: int) -> int:
    """What the cluster billed from ready until `until` (serving, or now while not serving)."""
    return charges_until(ready_at, until) * hourly_cents


ORCHESTRATORS = ("none", "slurm", "ray")
ROLE_WORDS = {
    "primary": "primary", "worker": "worker",
    "slurm_controller": "Slurm controller", "slurm_compute": "Slurm compute",
    "ray_head": "Ray head", "ray_worker": "Ray worker",
}

# A rank-aware start command (offered in the form): every node runs the same line and reads
# the env AI Reserve injects (contract §2.4).
TORCHRUN_TEMPLATE = (
    "bash -lc 'torchrun --nnodes=$NUM_NODES --nproc-per-node=$GPUS_PER_NODE "
    "--node-rank=$NODE_RANK --master-addr=$MASTER_ADDR --master-port=$MASTER_PORT train.py'"
)
VLLM_TEMPLATE = (
    "bash -lc 'if [ \"$NODE_RANK\" = 0 ]; then ray start --head --port=$MASTER_PORT && "
    "vllm serve $MODEL --tensor-parallel-size $GPUS_PER_NODE --pipeline-parallel-size "
    "$NUM_NODES; else ray start --block --address=$MASTER_ADDR:$MASTER_PORT; fi'"
)


class ReadinessState(enum.StrEnum):
    WATCHING = "watching"  # following the logs for the line (again, after a restart)
    SERVING = "serving"  # the line appeared: Serving announced (once per serving period)
    STOPPED = "stopped"  # a node was lost while serving: not serving until it runs again
    ENDED = "ended"  # the cluster stopped billing before it served (again)
    NONE = "none"  # no readiness rule: the row follows the log for the idle rule only


class ServedSpan(Frozen):
    """One past serving period: from the readiness line to the moment a node was lost."""

    began: datetime
    ended: datetime


class ReadinessWatch(Frozen):
    """One cluster's readiness check as stored: the rule, where each rank's log was read up to
    (the provider's `nextSince`, so a restart neither re-reads nor re-announces), and whether the
    owner was asked (`prompts`: how many times; Keep waiting is bound to it)."""

    cluster_id: str
    pattern: str | None  # None: no readiness rule (state NONE), only an idle rule
    all_ranks: bool = False
    limit_minutes: int
    state: ReadinessState = ReadinessState.WATCHING
    cursors: dict[str, datetime] = Field(default_factory=dict)  # rank → last line's ts read
    matched_ranks: tuple[int, ...] = ()
    serving_at: datetime | None = None  # when the current (or last) serving period began
    deadline_at: datetime | None = None  # ready + limit (+ limit per Keep waiting)
    prompts: int = 0
    updated_at: datetime
    # Serving is a state, not a medal: the periods that ended when a node was lost, and the
    # restart after which the log is read again for the line (None: never lost serving).
    served: tuple[ServedSpan, ...] = ()
    rearmed_at: datetime | None = None
    # The idle rule shares this follower and its cursors (bot/domain/idle.py): one log read
    # per node per poll serves both. `last_line_at`: the newest line on the idle rule's ranks.
    idle: IdleRule | None = None
    idle_state: IdleState = IdleState.OFF
    idle_episode: int = 0
    idle_since: datetime | None = None
    idle_fired_at: datetime | None = None
    idle_terminate_at: datetime | None = None
    last_line_at: datetime | None = None
    kept_until: datetime | None = None

    @property
    def stopped_at(self) -> datetime | None:
        """When it last stopped serving (a node was lost); None if it never did."""
        return self.served[-1].ended if self.served else None

    def not_serving(self, *, ready_at: datetime, end: datetime) -> list[tuple[datetime, datetime]]:
        """The spans [start, end) between ready and `end` in which it was not serving: before
        the line first appeared, and from each lost node until the line appeared again."""
        periods: list[tuple[datetime, datetime | None]] = [(p.began, p.ended)
                                                            for p in self.served]
        if self.state is ReadinessState.SERVING and self.serving_at is not None:
            periods.append((self.serving_at, None))
        spans: list[tuple[datetime, datetime]] = []
        start: datetime | None = ready_at
        for began, ended in periods:
            if start is not None and began > start:
                spans.append((start, min(began, end)))
            start = ended
        if start is not None and end > start:
            spans.append((start, end))
        return [(a, b) for a, b in spans if b > a]

    @property
    def rule(self) -> ReadinessRule:
        assert self.pattern is not None, "no readiness rule: state NONE is never followed"
        return ReadinessRule(pattern=self.pattern, all_ranks=self.all_ranks,
                             limit_minutes=self.limit_minutes)


# The provider's log timestamps have whole-second precision and `since` is strictly after: a
# cursor one second before the restart reads every line of the restart's second on.
RESTART_SLACK = timedelta(seconds=1)
_ENDED = (ClusterState.TERMINATING, ClusterState.TERMINATED, ClusterState.FAILED)


def after_observation(watch: ReadinessWatch, *, before: Observation | None, after: Observation,
                      nodes: int, now: datetime) -> dict[str, Any] | None:
    """How a new observation of the cluster moves its readiness check (None: it doesn't).

    Serving ends when a node is lost (degraded, or a new episode seen between two polls): the
    period is stored with its end, the provider's `episodeStartedAt`. Once every node runs
    again, the check watches once more — only the log after the restart (the last node's
    `lastRecoveredAt`), never the old lines — and Serving returns only when the line appears
    again. A cluster that ends while stopped ends its check."""
    lost = after.status is ClusterState.DEGRADED or \
        after.episode > (before.episode if before is not None else 0)
    state, changes = watch.state, dict[str, Any]()
    if state is ReadinessState.SERVING and lost and after.status not in _ENDED:
        stopped = after.episode_started_at or now
        began = watch.serving_at or stopped
        changes.update(state=ReadinessState.STOPPED,
                       served=(*watch.served, ServedSpan(began=began, ended=max(began, stopped))))
        state = ReadinessState.STOPPED
    if state is ReadinessState.STOPPED and after.status in _ENDED:
        changes["state"] = ReadinessState.ENDED
    elif state is ReadinessState.STOPPED and after.status is ClusterState.RUNNING:
        back = recovered_at(after, fallback=now)
        changes.update(state=ReadinessState.WATCHING, rearmed_at=back, matched_ranks=(),
                       cursors={str(r): back - RESTART_SLACK for r in watch.rule.ranks(nodes)},
                       deadline_at=back + watch.rule.limit)
    return changes or None


def outage_charges(c: ClusterRecord, *, began: datetime, until: datetime | None = None) -> int:
    """The hourly charges AI Reserve made while not serving after a node was lost: the charged
    hour marks in [began, until) — so far when `until` is None — as the spend module counts
    them (a mark passed with every node down was not charged)."""
    if c.ready_at is None:
        return 0
    return sum(1 for at in charge_instants(c, uncharged_marks(c))
               if began <= at and (until is None or at < until))


def deadline(*, ready_at: datetime, limit_minutes: int, prompts: int) -> datetime:
    """When the owner is (next) asked: ready + limit, and one more limit per Keep waiting."""
    return ready_at + timedelta(minutes=limit_minutes) * (prompts + 1)


def role_word(role: str) -> str:
    """A node's role as people say it (Slurm controller, Ray head …)."""
    return ROLE_WORDS.get(role, role)


def topology(orchestrator: str) -> str:
    """What `orchestrator=` sets up, in words (the node roles AI Reserve gives)."""
    if orchestrator == "slurm":
        return "Slurm: rank 0 is the controller, the others compute nodes"
    if orchestrator == "ray":
        return "Ray: rank 0 is the head, the others workers"
    return "none: rank 0 is the primary, the others workers"
