"""Where a cluster's recovery stands, from AI Reserve's `recovery` object as last observed
(contract §6): the episode, the attempts used of those allowed, and whether all are spent.

Once every attempt of an episode is spent (`recovery_exhausted`) AI Reserve makes no more —
`POST …/recover` answers 409 and automatic recovery never tries again, whatever `auto` says —
and the cluster stays degraded, billing its locked rate: terminate is the only way out. So
every surface asks `exhausted()` and offers terminate and only terminate, saying why.
"""

from __future__ import annotations

from bot.domain.models import ClusterRecord, ClusterState
from bot.domain.policy import money

EXHAUSTED_ERROR = "recovery_exhausted"


def exhausted(c: ClusterRecord) -> bool:
    """Degraded with every recovery attempt of its episode spent (the provider says so)."""
    if c.status is not ClusterState.DEGRADED:
        return False
    if c.observed is not None:  # the recovery object of the episode as last polled
        return c.observed.recovery_state == "exhausted"
    return c.last_error == EXHAUSTED_ERROR


def attempts(c: ClusterRecord) -> tuple[int, int]:
    """(used, allowed) in the current episode, as last observed."""
    if c.observed is None:
        return 0, 0
    return c.observed.attempts_used, c.observed.attempts_max


def exhausted_refusal(c: ClusterRecord, *, asked: str) -> str:
    """Why `asked` ("Recovering it", "Turning automatic recovery on") changes nothing now, and
    the one way out."""
    used, allowed = attempts(c)
    spent = f" ({used} of {allowed})" if allowed else ""
    down = c.observed.down_ranks if c.observed else ()
    nodes = ("Node rank " + ", ".join(str(r) for r in down) + (" stays" if len(down) == 1
                                                               else " stay") + " down"
             if down else "It stays degraded")
    return (f"Every recovery attempt of this episode of `{c.id}` is spent{spent}, and AI "
            f"Reserve makes no more — neither on request nor automatically. {asked} would "
            f"change nothing, so nothing was changed. {nodes} and the whole cluster keeps "
            f"billing {money(c.hourly_cents)} per hour. Terminating it is the way out: "
            f"`/cluster terminate {c.id}`.")
