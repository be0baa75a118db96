"""What round-trips through Slack: action ids, callback ids and typed, packed references.

A button `value` or a modal's `private_metadata` carries ids and the version of what the button
acts on as it was shown (the quote and rate for approvals, the envelope's hours for Extend, the
recovery attempt count for Recover …), never other state: a press of a stale copy changes
nothing (bot/services/claims.py). Each reference is a small pydantic model packed as compact
JSON with a short type tag, so a handler does `ApprovalRef.unpack(value)` and gets typed
fields or a clear `ValueError` — no `split(":")` anywhere.
"""

from __future__ import annotations

import json
from typing import ClassVar, Self

from pydantic import BaseModel, ConfigDict, ValidationError


class Action:
    """Every `action_id` the bot's buttons carry (the manifest test checks each has a listener)."""

    QUOTE_REQUEST_LAUNCH = "quote_request_launch"
    QUOTE_DISCARD = "quote_discard"
    APPROVE = "request_approve"
    REJECT = "request_reject"
    RETRY_LAUNCH = "request_retry_launch"
    TERMINATE = "cluster_terminate"
    RECOVER = "cluster_recover"
    AUTORECOVER_ON = "cluster_autorecover_on"
    KEEP_RUNNING = "cluster_keep_running"
    CLAIM = "cluster_claim"
    DELETE_VOLUME = "volume_delete"
    KEEP_VOLUME = "volume_keep"
    EXTEND = "cluster_extend"
    KEEP_WAITING = "cluster_keep_waiting"
    QUOTE_THIS = "quote_this"
    CLUSTER_STATUS = "cluster_status"
    REJECT_WITH_REASON = "request_reject_reason"
    GROW_VOLUME = "volume_grow"
    RELAUNCH_ON_VOLUME = "volume_relaunch"
    HOURS_CHART = "cluster_hours_chart"
    EXTENSION_APPROVE = "extension_approve"
    EXTENSION_REJECT = "extension_reject"
    WITHDRAW = "request_withdraw"
    ACKNOWLEDGE = "cluster_acknowledge"
    SNOOZE = "cluster_snooze"
    RECOVER_ALL_MINE = "digest_recover_all_mine"
    WAIT_FOR_STOCK = "request_wait_for_stock"
    QUOTE_WAIT_FOR_STOCK = "quote_wait_for_stock"
    KEEP_IDLE = "cluster_keep_idle"
    ALL: ClassVar[tuple[str, ...]] = (
        QUOTE_REQUEST_LAUNCH, QUOTE_DISCARD, APPROVE, REJECT, RETRY_LAUNCH, TERMINATE,
        RECOVER, AUTORECOVER_ON, KEEP_RUNNING, CLAIM, DELETE_VOLUME, KEEP_VOLUME, EXTEND,
        GROW_VOLUME, RELAUNCH_ON_VOLUME, HOURS_CHART, KEEP_WAITING, QUOTE_THIS, CLUSTER_STATUS,
        REJECT_WITH_REASON, EXTENSION_APPROVE, EXTENSION_REJECT, WITHDRAW, ACKNOWLEDGE, SNOOZE,
        RECOVER_ALL_MINE, WAIT_FOR_STOCK, QUOTE_WAIT_FOR_STOCK, KEEP_IDLE,
    )


class View:
    """Every modal `callback_id`."""

    LAUNCH_REQUEST = "launch_request_modal"
    GROW_VOLUME = "volume_grow_modal"
    REJECT_REASON = "reject_reason_modal"
    ALL: ClassVar[tuple[str, ...]] = (LAUNCH_REQUEST, GROW_VOLUME, REJECT_REASON)


class Ref(BaseModel):
    """A typed reference packed into a button value / private_metadata (≤ 2000 chars)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    tag: ClassVar[str]

    def pack(self) -> str:
        packed = json.dumps([self.tag, self.model_dump(mode="json")], separators=(",", ":"))
        if len(packed) > 2000:
            raise ValueError("a packed reference must fit a Slack button value (2000 chars)")
        return packed

    @classmethod
    def unpack(cls, raw: str | None) -> Self:
        try:
            tag, fields = json.loads(raw or "")
            if tag != cls.tag:
                raise ValueError(f"expected a {cls.tag} reference, got {tag!r}")
            return cls.model_validate(fields)
        except (ValueError, TypeError, ValidationError) as exc:
            raise ValueError(f"not a valid {cls.__name__}: {raw!r:.80}") from exc


class QuoteRef(Ref):
    tag = "q"
    quote_id: str


class ApprovalRef(Ref):
    """Binds an Approve/Reject click to exactly what the card showed: this quote at this rate."""

    tag = "a"
    request_id: str
    quote_id: str
    hourly_cents: int


class RequestRef(Ref):
    """Retry launch: bound to the failed attempt it was shown (`launch_attempt`)."""

    tag = "r"
    request_id: str
    attempt: str


class WithdrawRef(Ref):
    """Withdraw: the request (withdrawing happens once, by compare-and-set on `pending`)."""

    tag = "w"
    request_id: str


class WaitRef(Ref):
    """Wait for stock: the request (it starts waiting once, by compare-and-set)."""

    tag = "ws"
    request_id: str


class ClusterRef(Ref):
    """Terminate and Claim: each happens once per cluster, so the id is the whole version."""

    tag = "c"
    cluster_id: str


class EnvelopeRef(Ref):
    """Extend: bound to the envelope's hours as shown, and the hours it adds (`add`; 0 on a
    button from before it was carried: the policy's lifetime, else the envelope once more)."""

    tag = "e"
    cluster_id: str
    hours: int
    add: int = 0


class ExtensionRef(Ref):
    """Approve/Reject an extension: bound to the hours it adds on the envelope it extends."""

    tag = "x"
    extension_id: str
    hours: int
    from_hours: int


class RecoveryRef(Ref):
    """Recover and Turn on auto-recovery: bound to the recovery episode and attempts used."""

    tag = "rc"
    cluster_id: str
    episode: int
    attempts_used: int


class ReminderRef(Ref):
    """Keep running: bound to the accrued hour its reminder was about."""

    tag = "h"
    cluster_id: str
    hour: int


class ReadinessRef(Ref):
    """Keep waiting: bound to the not-serving prompt it came with (the 1st, 2nd … ask)."""

    tag = "rd"
    cluster_id: str
    prompt: int


class DutyRef(Ref):
    """Acknowledge (once per degraded episode) and Snooze 1 h: bound to the episode and how
    many times it had been snoozed when shown."""

    tag = "du"
    cluster_id: str
    episode: int
    snoozes: int = 0


class DigestRef(Ref):
    """Recover all mine: the storm's digest and how many of its clusters were degraded when
    shown (a press is once per person and showing)."""

    tag = "dg"
    digest_id: str
    degraded: int


class IdleRef(Ref):
    """Keep for N h: bound to the idle episode its DM was about (the 1st, 2nd … time)."""

    tag = "id"
    cluster_id: str
    episode: int
    hours: int


class VolumeRef(Ref):
    """Delete volume (once per volume) and Keep (once per reminder: `reminder`, its due time
    in epoch seconds)."""

    tag = "v"
    volume_id: str
    reminder: int = 0


class GrowRef(Ref):
    """Grow: bound to the volume's size as shown (a grow from that size happens once)."""

    tag = "g"
    volume_id: str
    size_gb: int


class RelaunchRef(Ref):
    """Relaunch on this volume: once per terminated cluster and the volume it kept."""

    tag = "rv"
    cluster_id: str
    volume_id: str


class HoursRef(Ref):
    """Billed hours chart: once per cluster and billed hours as the receipt showed them."""

    tag = "hc"
    cluster_id: str
    hours: int


class AlternativeRef(Ref):
    """Quote this: another accelerator or location for the plan of the quote it was shown on
    (`quote_id`, its version); every press prices afresh, so none needs a claim."""

    tag = "alt"
    quote_id: str
    accelerator: str
    gpus_per_node: int
    nodes: int
    location: str


def unpack_any(raw: str | None) -> Ref:
    """Whichever reference `raw` holds, by its tag (for code that reads many kinds of button)."""
    for kind in Ref.__subclasses__():
        try:
            return kind.unpack(raw)
        except ValueError:
            continue
    raise ValueError(f"not a reference: {raw!r:.80}")
