"""When the approved spend envelope speaks and ends: pure timing, on AI Reserve's clock.

AI Reserve charges a cluster's hour k (k = 0, 1, 2, …) at `readyAt + k·1 h`, each started hour in
full. A cluster approved for H hours has therefore had all of its H hours charged by
`readyAt + (H−1) h`, and hour H + 1 is charged at `readyAt + H h` — `ends_at`. To never bill more
than was approved, an enforced envelope is terminated at the *deadline* `ends_at − margin`,
where the margin covers the sweep's poll interval (the sweep that first sees the deadline
passed may run that late) and a slow provider (`PROVIDER_ALLOWANCE`: the terminate call, its
retries, and the error in our estimate of the provider's clock).

The stages, each at most once per envelope, and never going back:
- `warned` at 80 % of the hours (to the owner);
- enforced: `final` one hour before the last charged hour ends (`ends_at − 1 h`, and at least two
  poll intervals before the deadline) with Extend/Terminate to the owner and approvers, then
  `enforced` at the deadline;
- not enforced: `due` at the deadline — the 100 % prompt arrives before hour H + 1 is charged.
A sweep that finds several stages due at once moves straight to the furthest one.
An extension (stage `extended`) starts the count again on the longer envelope.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from bot.domain.charges import charge_instants
from bot.domain.models import ClusterRecord, ClusterState
from bot.domain.policy import money

WARN_AT = 0.8
FINAL_WARNING = timedelta(hours=1)
# What a terminate may take from the sweep's decision to landing at AI Reserve: the client's
# timeout and retries (30 s a try), and the error of the provider-clock estimate (seconds).
PROVIDER_ALLOWANCE = timedelta(minutes=3)

_RANK = {"none": 0, "extended": 0, "warned": 1, "final": 2, "due": 3, "enforced": 4}


def envelope_terms(hours: int, hourly_cents: int, *, terminates: bool | None,
                   brief: bool = False) -> str:
    """One line for the approval card and the quote: what the envelope covers and how it ends.
    `terminates` None: not known here (the policy decides); never worded as a cap unless it is
    one. `brief`: for a confirm dialog (300 characters in all)."""
    covers = f"Envelope {hours} h ≈ {money(hourly_cents * hours)}"
    if brief:
        return covers + (": it ends in termination." if terminates else
                         ", not a cap: only a prompt at its end." if terminates is False else
                         ": a prompt at its end (terminated only if the policy enforces it).")
    if terminates:
        return (f"{covers}, enforced: the cluster is terminated before hour {hours + 1} is "
                f"charged, so it bills at most {money(hourly_cents * hours)}.")
    if terminates is None:
        return (f"{covers}: at its end the owner and approvers are asked to extend or "
                "terminate (terminated then only if the spend policy enforces envelopes).")
    return (f"{covers}, not a cap: at its end the owner and approvers are only asked to extend "
            f"or terminate; until someone terminates it, it bills on at "
            f"{money(hourly_cents)}/h.")


def margin_for(poll_interval: timedelta) -> timedelta:
    """How long before hour H + 1 is charged the envelope must be acted on."""
    return poll_interval + PROVIDER_ALLOWANCE


def ends_at(record: ClusterRecord) -> datetime | None:
    """When AI Reserve charges the first hour beyond the envelope (readyAt + H h)."""
    if record.lifetime_hours is None or record.ready_at is None:
        return None
    return record.ready_at + timedelta(hours=record.lifetime_hours)


def deadline(record: ClusterRecord, *, margin: timedelta) -> datetime | None:
    """When the envelope is acted on: terminated (enforced) or prompted (not enforced)."""
    end = ends_at(record)
    return None if end is None else end - margin


def proven_now(record: ClusterRecord, estimate: datetime) -> datetime:
    """AI Reserve's time for `record`'s envelope: the estimate, or — when the cluster's own
    figures say more — the instant of the last charge AI Reserve shows (`accruedHours`, less
    the marks it passed uncharged). Its bill is the last word: a cluster showing hour H + 1
    charged is past its envelope's end whatever the estimate says."""
    charged = charge_instants(record)
    return max(estimate, charged[-1]) if charged else estimate


def milestones(record: ClusterRecord, *, enforce: bool,
               margin: timedelta) -> list[tuple[str, datetime]]:
    """Each stage of the envelope with the instant it falls due (empty without an envelope)."""
    end = ends_at(record)
    if end is None:
        return []
    assert record.ready_at is not None and record.lifetime_hours is not None
    act = end - margin
    warn = record.ready_at + timedelta(hours=record.lifetime_hours * WARN_AT)
    if enforce:
        # At least two poll intervals before the deadline, so a sweep always says it first.
        poll = margin - PROVIDER_ALLOWANCE
        return [("warned", warn), ("final", min(end - FINAL_WARNING, act - 2 * poll)),
                ("enforced", act)]
    return [("warned", warn), ("due", act)]


def next_stage(record: ClusterRecord, *, now: datetime, enforce: bool,
               margin: timedelta) -> str | None:
    """The stage `record` should move to at `now` (provider time), or None."""
    if record.status not in (ClusterState.RUNNING, ClusterState.DEGRADED):
        return None
    due = [stage for stage, at in milestones(record, enforce=enforce, margin=margin)
           if at <= now]
    if not due:
        return None
    furthest = max(due, key=_RANK.__getitem__)
    return furthest if _RANK[furthest] > _RANK.get(record.envelope_stage, 0) else None
