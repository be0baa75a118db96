"""A button press claimed in the database: one press of one version of one thing acts.

Every button carries what it acts on and the version it was shown (the envelope's hours, the
recovery attempt count, the reminder's hour …). The first press of that (action, subject,
version) claims it; any later delivery of it — a double click, a proxy retry, another person's
copy of the same card — finds the claim and is told what already happened, by whom.
"""

from __future__ import annotations

from datetime import datetime

from bot.domain.models import Frozen


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
