"""Readiness, the docs' way: `running` is infrastructure only, so the bot watches the workload's
own log for a line that says it serves (pure: rules, presets, validation, what waiting cost).

A rule is a line pattern (a Python regex, searched in each log line) that rank 0 prints — or
every rank, when asked — once the workload serves, and a limit after which the owner is asked
whether to keep waiting. Money follows the provider's hour marks: one charge at readyAt + k·1 h
(the first at readyAt), as the rest of the bot counts (bot/domain/spend.py).
"""

from __future__ import annotations

import enum
import re
from datetime import datetime, timedelta

from pydantic import Field

from bot.domain.models import DEFAULT_LIMIT_MINUTES, Frozen, ReadinessRule
from bot.domain.spend import HOUR

MAX_LIMIT_MINUTES = 7 * 24 * 60
MAX_PATTERN = 300

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
    if len(pattern) > MAX_PATTERN:
        errors["readiness"] = f"A readiness pattern is at most {MAX_PATTERN} characters."
    else:
        try:
            re.compile(pattern)
        except re.error as exc:
            errors["readiness"] = (f"`{pattern[:60]}` is not a valid pattern: {exc}. Escape "
                                   "special characters with `\\`, or pick a preset "
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
    WATCHING = "watching"  # following the logs for the line
    SERVING = "serving"  # the line appeared: Serving announced (once)
    ENDED = "ended"  # the cluster stopped billing before it served


class ReadinessWatch(Frozen):
    """One cluster's readiness check as stored: the rule, where each rank's log was read up to
    (the provider's `nextSince`, so a restart neither re-reads nor re-announces), and whether the
    owner was asked (`prompts`: how many times; Keep waiting is bound to it)."""

    cluster_id: str
    pattern: str
    all_ranks: bool = False
    limit_minutes: int
    state: ReadinessState = ReadinessState.WATCHING
    cursors: dict[str, datetime] = Field(default_factory=dict)  # rank → last line's ts read
    matched_ranks: tuple[int, ...] = ()
    serving_at: datetime | None = None
    deadline_at: datetime | None = None  # ready + limit (+ limit per Keep waiting)
    prompts: int = 0
    updated_at: datetime

    @property
    def rule(self) -> ReadinessRule:
        return ReadinessRule(pattern=self.pattern, all_ranks=self.all_ranks,
                             limit_minutes=self.limit_minutes)


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
