"""Idle rules, from the workload's own log (pure: the rule, presets, validation, when it fires,
what the idle time billed).

AI Reserve bills a cluster every hour from readyAt until someone terminates it, and exposes no
GPU or job activity; the workload's log is the one signal there is. A rule says *idle after N
minutes without a new line* on rank 0 (or on every rank: idle only when no rank printed) and/or
*done when a line matches* (a preset or a pattern). When one fires, the owner is asked once per
idle episode; **Keep for N h** postpones the rules; with the policy's
`idle_terminate_after_minutes` the cluster is terminated after that grace unless kept.
Money follows the provider's hour marks (readyAt + k·1 h, the first at readyAt).
"""

from __future__ import annotations

import enum
from datetime import datetime, timedelta

from bot.domain.models import Frozen, IdleRule
from bot.domain.patterns import problem

MIN_MINUTES, MAX_MINUTES = 5, 1440
DEFAULT_KEEP_HOURS = 2

# name → (what it is, the pattern): a line the tool prints when the job has ended.
DONE_PRESETS: dict[str, tuple[str, str]] = {
    "torchrun": ("torchrun exit", r"Local worker group finished|ChildFailedError|"
                                  r"torchrun.* exited with (code|status)"),
    "training": ("`Training completed`", r"Training completed"),
    "slurm": ("Slurm job end", r"_job_complete: JobId=\d+ done|JobState=(COMPLETED|FAILED)"),
    "ray": ("Ray job succeeded", r"Job '[^']*' succeeded"),
}


def parse_idle(minutes_text: str, done_text: str, *, all_ranks: bool
               ) -> IdleRule | None | dict[str, str]:
    """The form's idle fields → a rule (None: none asked for), or `{field: message}`.

    `done_text` is a preset name (torchrun, training, slurm, ray) or a pattern."""
    errors: dict[str, str] = {}
    minutes: int | None = None
    raw = minutes_text.strip()
    if raw:
        if not raw.isdigit() or not MIN_MINUTES <= int(raw) <= MAX_MINUTES:
            errors["idle_minutes"] = (f"`{raw[:20]}`: a whole number of minutes, {MIN_MINUTES} "
                                      f"to {MAX_MINUTES} (a day), e.g. `30`.")
        else:
            minutes = int(raw)
    done = done_pattern(done_text)
    if done is not None and (why := problem(done)) is not None:
        errors["idle_done"] = (f"{why} Or pick a preset "
                               f"({', '.join(DONE_PRESETS)}).")
    if errors:
        return errors
    if minutes is None and done is None:
        return None
    return IdleRule(quiet_minutes=minutes, all_ranks=all_ranks, done=done)


def done_pattern(text: str) -> str | None:
    text = text.strip()
    if not text:
        return None
    return DONE_PRESETS[text.lower()][1] if text.lower() in DONE_PRESETS else text


def done_label(pattern: str) -> str:
    """A preset by its name, else the pattern itself (for messages)."""
    return next((label for label, p in DONE_PRESETS.values() if p == pattern), f"`{pattern}`")


class IdleState(enum.StrEnum):
    OFF = "off"  # no idle rule for this cluster
    ACTIVE = "active"  # following the log; the rules may fire
    IDLE = "idle"  # a rule fired: the owner was asked (episode `idle_episode`)
    TERMINATING = "terminating"  # the grace passed unkept: the terminate intent is (being) made
    ENDED = "ended"  # the cluster stopped billing


class Fired(Frozen):
    """A rule fired: since when the cluster has been idle, and which rule said so."""

    since: datetime
    reason: str  # "done" | "quiet"
    line: str | None = None  # the done line


def quiet_fired(rule: IdleRule, *, last_line_at: datetime, now: datetime) -> Fired | None:
    """The quiet rule: no new line on the watched ranks for `quiet_minutes`."""
    if rule.quiet_minutes is None:
        return None
    if now - last_line_at >= timedelta(minutes=rule.quiet_minutes):
        return Fired(since=last_line_at, reason="quiet")
    return None


def warn_at(terminate_at: datetime, fired_at: datetime) -> datetime:
    """When the warning before an idle termination goes out: half the grace before it, at most
    ten minutes before."""
    return max(fired_at + (terminate_at - fired_at) / 2, terminate_at - timedelta(minutes=10))
