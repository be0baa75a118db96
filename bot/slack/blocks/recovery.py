"""What the bot says about a cluster's recovery: the episode in `/cluster status`, the line
under a degraded cluster, the answer to turning automatic recovery on or off, and the Recover /
Turn on auto-recovery buttons of the degraded notice.

Once every attempt is spent (bot/domain/recovery.py) AI Reserve makes no more, so these words
offer terminate and only terminate, and say why.
"""

from __future__ import annotations

from slack_sdk.models.blocks import ButtonElement

from bot.domain import recovery
from bot.domain.claims import recovery_version
from bot.domain.models import ClusterRecord, ClusterState
from bot.slack.blocks.format import *
from bot.slack.blocks.message import *
from bot.slack.ids import Action, RecoveryRef


def exhausted_note(c: ClusterRecord) -> str:
    """The line under an exhausted cluster: why recovery is over and the way out."""
    used, allowed = recovery.attempts(c)
    spent = f" ({used} of {allowed})" if allowed else ""
    return (f":red_circle: Every recovery attempt of this episode is spent{spent}: AI Reserve "
            "makes no more, on request or automatically, so it stays degraded and bills the "
            f"full {hourly(c.hourly_cents)}. Terminate is the way out: `/cluster terminate "
            f"{escape(truncate(c.id, ID_MAX))}`.")


def degraded_note(c: ClusterRecord, *, auto_recovery: bool) -> str:
    """The line under a degraded cluster: what happens next, and who can act."""
    if recovery.exhausted(c):
        return exhausted_note(c)
    ref = escape(truncate(c.id, ID_MAX))
    used, allowed = recovery.attempts(c)
    left = (f" ({allowed - used} of {allowed} attempts left in this episode)"
            if allowed else "")
    if auto_recovery:
        return ("Automatic recovery is on: AI Reserve restarts lost nodes on the same hardware "
                f"at its health passes{left}.")
    return (f"Automatic recovery is off: `/cluster recover {ref}` makes one attempt now{left}, "
            "or terminate it.")


def episode_text(c: ClusterRecord) -> str | None:
    """`/cluster status`'s recovery episode: attempts used of allowed, its state, skipped
    nodes and whether automatic recovery is on (None before any node was ever lost)."""
    o = c.observed
    if o is None or not o.episode:
        return None
    used, allowed = o.attempts_used, o.attempts_max
    began = f" since {when(o.episode_started_at)}" if o.episode_started_at else ""
    if c.status is ClusterState.DEGRADED:
        head = f"Episode {o.episode}{began}: *{used} of {allowed} attempts used*"
    else:
        head = f"Last episode ({o.episode}){began}: {used} of {allowed} attempts used"
    lines = [head]
    if recovery.exhausted(c):
        lines.append("*Exhausted*: AI Reserve makes no more attempts (on request or "
                     "automatically); terminate is the way out.")
    elif o.recovery_state == "in_progress":
        lines.append(f"Attempt {used + 1} is running now.")
    elif c.status is ClusterState.DEGRADED:
        lines.append(f"{allowed - used} attempt{'s' if allowed - used != 1 else ''} left; "
                     "automatic recovery is " + ("on." if o.auto_recovery else "off."))
    if o.skipped:
        ranks = ", ".join(str(r) for r in o.skipped[:16])
        lines.append(f"AI Reserve could not bring back rank {escaped(ranks, 100)} in its last "
                     "attempt.")
    return "*Recovery*\n" + "\n".join(lines)


def auto_recovery_said(c: ClusterRecord, *, on: bool) -> str:
    """The answer once automatic recovery was turned on or off: what AI Reserve will do now."""
    ref = f"`{escaped(c.id, ID_MAX)}`"
    used, allowed = recovery.attempts(c)
    if not on:
        tail = (f" It is degraded and bills {hourly(c.hourly_cents)} meanwhile."
                if c.status is ClusterState.DEGRADED else "")
        return (f"Automatic recovery is off for {ref}: AI Reserve leaves a lost node down until "
                f"someone recovers it (`/cluster recover`) or terminates the cluster.{tail}")
    if c.status is ClusterState.DEGRADED:
        left = f" ({allowed - used} of {allowed} attempts left in this episode)" if allowed else ""
        if c.observed is not None and c.observed.recovery_state == "in_progress":
            after = allowed - used - 1
            then = (f"if nodes stay down, AI Reserve tries again at a later health pass "
                    f"({after} more attempt{'s' if after != 1 else ''} allowed)" if after > 0
                    else "it is this episode's last attempt")
            return f"Automatic recovery is on for {ref}: an attempt is running now; {then}."
        return (f"Automatic recovery is on for {ref}: AI Reserve tries at its next health "
                f"pass{left}.")
    per = f" (up to {allowed} attempts per episode)" if allowed else ""
    return (f"Automatic recovery is on for {ref}: if a node is lost, AI Reserve restarts it "
            f"on the same hardware at its next health pass{per}.")


def recover_button(c: ClusterRecord, attempts: int | None) -> ButtonElement:
    budget = f"one of this episode's {attempts} attempts" if attempts else "one attempt"
    return button(
        "Recover now (one attempt)", action_id=Action.RECOVER,
        value=_recovery_ref(c), style="primary",
        confirm=confirm(
            "Make one recovery attempt now?",
            f"AI Reserve restarts the down nodes of {truncate(c.id, ID_MAX)} on the same "
            f"hardware; healthy nodes are untouched. It uses {budget}. The cluster bills "
            f"{money(c.hourly_cents)} per hour meanwhile.",
            ok="Recover now",
        ),
    )


def autorecover_button(c: ClusterRecord, attempts: int | None) -> ButtonElement:
    upto = f", up to {attempts} attempts per episode" if attempts else ""
    return button(
        "Turn on auto-recovery", action_id=Action.AUTORECOVER_ON,
        value=_recovery_ref(c),
        confirm=confirm(
            "Turn on automatic recovery?",
            f"AI Reserve restarts lost nodes of {truncate(c.id, ID_MAX)} at each health pass"
            f"{upto}. The cluster bills {money(c.hourly_cents)} per hour throughout.",
            ok="Turn it on",
        ),
    )


def _recovery_ref(c: ClusterRecord) -> str:
    episode, used = recovery_version(c.observed)
    return RecoveryRef(cluster_id=c.id, episode=episode, attempts_used=used).pack()
