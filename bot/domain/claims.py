"""A button press claimed in the database: one press of one version of one thing acts.

Every button carries what it acts on and the version it was shown (the envelope's hours, the
recovery attempt count, the reminder's hour …). The first press of that (action, subject,
version) claims it; any later delivery of it — a double click, a proxy retry, another person's
copy of the same card — finds the claim and is told what already happened, by whom.
"""

from __future__ import annotations

import hashlib
from datetime import datetime

from bot.domain.models import Frozen, LaunchRequest, Observation


class ClaimKey(Frozen):
    action: str  # the button's action id
    subject_id: str  # the cluster, request or volume it acts on
    version: str  # the state the button was shown ("-": the action can happen only once)


class ActionClaim(Frozen):
    key: ClaimKey
    actor_id: str  # who pressed first
    claimed_at: datetime
    done_at: datetime | None = None  # None: still being done (or its process died)
    answer: str | None = None  # what a later press is told once it is done


def recovery_version(observed: Observation | None) -> tuple[int, int]:
    """(episode, attempts used) of a cluster's recovery, as last observed: a Recover button's
    version. A new attempt — ours, another person's or AI Reserve's own — changes it."""
    return (observed.episode, observed.attempts_used) if observed else (0, 0)


def launch_attempt(request: LaunchRequest) -> str:
    """A Retry launch button's version: which failed attempt it was shown (a short digest of the
    attempt's idempotency key, so the key itself never travels through Slack)."""
    key = request.idempotency_key or ""
    return hashlib.sha256(key.encode()).hexdigest()[:12]


class Delivery(Frozen):
    """One request from Slack, as far as "the same one again" goes.

    An event's `event_id` is Slack's own: stable across its retries, unique otherwise, so a
    second delivery of it is always a repeat. A command or a form submission has no id; it is
    named by a digest of its payload (which holds Slack's `trigger_id`, minted per person's
    action), and a second delivery is a repeat only when it says it is a retry
    (`X-Slack-Retry-Num`): a retrying proxy resends the very bytes it was given.
    """

    kind: str  # EVENT or PAYLOAD
    id: str
    retried: bool = False

    @property
    def key(self) -> ClaimKey:
        return ClaimKey(action=f"delivery:{self.kind}", subject_id=self.id, version="-")

    def repeats(self) -> bool:
        """Whether this delivery, finding its key already claimed, is a repeat to drop."""
        return self.kind == EVENT or self.retried


EVENT, PAYLOAD = "event", "payload"
DELIVERY_ACTIONS = (f"delivery:{EVENT}", f"delivery:{PAYLOAD}")
