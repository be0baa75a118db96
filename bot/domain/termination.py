"""A terminate is a durable intent: stored before AI Reserve is asked, retried until it takes.

`TerminationIntent` is one cluster's stored terminate; `retry_delay` is the capped backoff
between attempts; after `WARN_AFTER_ATTEMPTS` failed attempts the person who asked is told that
the cluster still bills (once), and when AI Reserve finally reports it terminated they are told
that too.
"""

from __future__ import annotations

import enum
from datetime import datetime, timedelta

from bot.domain.models import Frozen

RETRY_BASE = timedelta(seconds=5)
RETRY_CAP = timedelta(minutes=5)
# How long one replica holds an attempt it claimed (the provider call is bounded well below).
CLAIM_LEASE = timedelta(minutes=2)
WARN_AFTER_ATTEMPTS = 3
POLICY = "spend-policy"  # `requested_by` of a terminate the spend envelope enforced


class TerminationState(enum.StrEnum):
    PENDING = "pending"  # not yet accepted by AI Reserve: attempts continue
    ACCEPTED = "accepted"  # AI Reserve said terminating/terminated: waiting for "terminated"
    DONE = "done"  # terminated, and the person who asked was told


class TerminationIntent(Frozen):
    cluster_id: str
    requested_by: str  # a Slack user id, or POLICY
    requested_at: datetime
    state: TerminationState = TerminationState.PENDING
    attempts: int = 0  # attempts made (each may send several requests: the client retries)
    requests: int = 0  # terminate requests AI Reserve was sent, in all (0 before 0020)
    next_attempt_at: datetime
    last_error: str | None = None
    warned_at: datetime | None = None
    done_at: datetime | None = None
    updated_at: datetime


def requests_sent(intent: TerminationIntent) -> int:
    """The terminate requests sent for `intent` (its attempts, for one stored before they
    were counted)."""
    return intent.requests or intent.attempts


def retry_delay(attempts: int) -> timedelta:
    """After the `attempts`-th failed attempt (1-based): 5 s, 10 s, 20 s … capped at 5 min."""
    exponent = min(max(attempts, 1) - 1, 16)
    return min(RETRY_BASE * (1 << exponent), RETRY_CAP)
