"""The audit trail: every state-changing action and every refused attempt, appended once.

Services decorate their public actions with `@audited(action, subject=...)`: a success is
written with the amount concerned, a `DomainError` (a refusal) with its reason, a provider
failure as failed — and the error goes on to the person unchanged. Actions with no actor (a
sweep, a timer, the spend policy) call `AuditLog.write` themselves with `actor=None`.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Coroutine
from datetime import datetime
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from bot.clock import Clock
from bot.domain.errors import DomainError, ProviderUnavailable
from bot.domain.models import (
    Actor,
    AuditEntry,
    ClusterRecord,
    LaunchRequest,
    QuoteInfo,
    RequestStatus,
    VolumeRecord,
)
from bot.domain.policy import money
from bot.domain.reasons import why_terminated
from bot.domain.templates import ClusterTemplate
from bot.logs import log_context
from bot.reserve import errors as api
from bot.services.stakes import Stake
from storage.db import Database

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")


class AuditLog:
    def __init__(self, *, db: Database, clock: Clock) -> None:
        self._db = db
        self._clock = clock

    async def write(self, *, actor: Actor | None, action: str, subject_id: str, outcome: str,
                    amount_cents: int | None = None, detail: str = "",
                    idempotency_key: str | None = None) -> None:
        entry = AuditEntry(
            at=self._clock.now(), actor_id=actor.user_id if actor else None,
            team_id=actor.team_id if actor else None, action=action, subject_id=subject_id,
            amount_cents=amount_cents, outcome=outcome, detail=detail[:2000],
            idempotency_key=idempotency_key)
        async with self._db.transaction() as repos:
            await repos.audit.add(entry)

    async def kept_billing(self, *, actor: Actor, action: str, record: ClusterRecord,
                           kept: str) -> None:
        """Someone chose to keep `record` billing: what they `kept`, and its cost meanwhile."""
        await self.write(actor=actor, action=action, subject_id=record.id, outcome="ok",
                         amount_cents=record.hourly_cents,
                         detail=f"{kept}; it bills {money(record.hourly_cents)}/h meanwhile")


class Audited(Protocol):
    _audit: AuditLog


S = TypeVar("S", bound=Audited)


Method = Callable[Concatenate[S, P], Coroutine[Any, Any, R]]


def audited(action: str, *, subject: str, refusals_only: bool = False,
            stake: Stake | None = None,
            refused_subject: Callable[[tuple[Any, ...]], str] | None = None,
            ) -> Callable[[Method[S, P, R]], Method[S, P, R]]:
    """Record the call's outcome; `subject` names the keyword argument holding the subject id.

    `refusals_only`: a check before a confirm (e.g. `/cluster terminate`'s) — its refusal is
    an attempt worth recording, its success is not yet an action. `stake`: the money a refusal
    refused (bot/services/stakes.py), for the row's amount. `refused_subject`: what a refusal
    is about when the call names no id yet (from its positional arguments)."""

    def wrap(method: Method[S, P, R]) -> Method[S, P, R]:
        @functools.wraps(method)
        async def run(service: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
            actor = kwargs.get("actor")
            who = actor if isinstance(actor, Actor) else None
            subject_id = (refused_subject(args) if refused_subject is not None
                          else str(kwargs.get(subject, "?")))
            # The lines logged while acting on a cluster carry its id (bot/logs.py).
            try:
                with log_context(cluster_id=subject_id if subject == "cluster_id" else None):
                    result = await method(service, *args, **kwargs)
            except ProviderUnavailable as exc:  # AI Reserve failed: nothing refused it
                await service._audit.write(actor=who, action=action, subject_id=subject_id,
                                        outcome="failed", detail=exc.user_message)
                raise
            except DomainError as exc:
                amount = await _at_stake(stake, service, kwargs)
                await service._audit.write(actor=who, action=action, subject_id=subject_id,
                                        outcome="refused", amount_cents=amount,
                                        detail=exc.user_message)
                raise
            except api.ApiError as exc:
                await service._audit.write(actor=who, action=action, subject_id=subject_id,
                                        outcome="failed", detail=f"{exc.code}: {exc.message}")
                raise
            if refusals_only:
                return result
            await service._audit.write(
                actor=who, action=action, subject_id=_subject(result, subject_id),
                outcome="ok", amount_cents=_amount(result),
                detail=describe(action, result, kwargs),
                idempotency_key=getattr(result, "idempotency_key", None))
            return result

        return run

    return wrap


async def _at_stake(stake: Stake | None, service: Any, kwargs: dict[str, Any]) -> int | None:
    """The amount a refusal refused; None if unknown (a failed look-up hides no refusal)."""
    if stake is None:
        return None
    try:
        return await stake(service._db, kwargs)
    except Exception:  # best effort: the refusal is written and said whatever this does
        log.warning("could not read the amount a refusal refused", exc_info=True)
        return None


def describe(action: str, result: Any, kwargs: dict[str, Any]) -> str:
    """A successful action's row in words: what it acted on, at which rate or size, and what
    the call said (on/off, the channel, the node, the reason). The amount column holds the
    rate (`_amount`); the words repeat it in dollars so a CSV reader needs no lookup."""
    said: list[str] = []
    if isinstance(result, QuoteInfo):
        shape = result.spec.shape
        said.append(f"quote {result.id}: {shape.nodes} × {shape.gpus_per_node} "
                    f"{result.accelerator_name} in {result.location} at "
                    f"{money(result.hourly_cents)}/h"
                    + (f", planned {result.spec.planned_hours} h ≈ "
                       f"{money(result.hourly_cents * result.spec.planned_hours)}"
                       if result.spec.planned_hours else ""))
    elif isinstance(result, LaunchRequest):
        said.append(f"request {result.id} at {money(result.hourly_cents)}/h: "
                    f"{result.status.value.replace('_', ' ')}")
        if result.status is RequestStatus.PENDING:
            said.append(f"{result.approvals_needed} approval(s) needed")
        if result.lifetime_hours:
            said.append(f"envelope {result.lifetime_hours} h ≈ "
                        f"{money(result.hourly_cents * result.lifetime_hours)}")
        if result.decision_note:
            said.append(f"reason: {result.decision_note}")
        if result.status is RequestStatus.WAITING and result.wait_until is not None:
            said.append(f"waits for stock up to {result.wait_hours} h, until "
                        f"{result.wait_until:%Y-%m-%d %H:%M} UTC")
    elif isinstance(result, ClusterRecord):
        said.append(f"cluster {result.id} ({result.status.value}) at "
                    f"{money(result.hourly_cents)}/h; {money(result.accrued_cents)} over "
                    f"{result.accrued_hours} billed hour(s) so far")
        if result.lifetime_hours:
            said.append(f"envelope {result.lifetime_hours} h ≈ "
                        f"{money(result.hourly_cents * result.lifetime_hours)}")
    elif isinstance(result, ClusterTemplate):
        said.append(f"template {result.name} ({result.scope}) from {result.source_cluster_id}: "
                    f"{result.shape_words()}"
                    + (f", project {result.project}" if result.project else ""))
    elif isinstance(result, VolumeRecord):
        said.append(f"volume {result.id}: {result.size_gb:,} GB at "
                    f"{money(result.monthly_cents)}/month ({result.status})")
    on = kwargs.get("on")
    if isinstance(on, bool):
        said.append(f"automatic recovery turned {'on' if on else 'off'}")
    for key, words in (("channel_id", "notices also to <#{}>"), ("node", "node {} log read"),
                       ("hours", "{} hour(s) added"), ("size_gb", "grown to {:,} GB")):
        if kwargs.get(key) is not None and not (key == "channel_id" and action == "quote") \
                and not (key == "hours" and action == "wait"):  # said with the wait above
            said.append(words.format(kwargs[key]))
    return "; ".join(said) or action


def _amount(result: Any) -> int | None:
    value = getattr(result, "hourly_cents", None)
    return value if isinstance(value, int) else None


def _subject(result: Any, fallback: str) -> str:
    value = getattr(result, "id", None)
    return value if isinstance(value, str) else fallback


def ended_elsewhere(record: ClusterRecord, *, reason: str | None, at: datetime) -> AuditEntry:
    """The audit line for a cluster the bot did not terminate itself: payment grace, a
    terminate at AI Reserve directly, or gone at AI Reserve. Written by the watcher in the
    transaction that queues its notice (once per cluster, as the notice is)."""
    return AuditEntry(at=at, actor_id=None, action="terminated", subject_id=record.id,
                      amount_cents=record.accrued_cents, outcome="ok",
                      detail=why_terminated(reason=reason, requested_by=None),
                      idempotency_key=f"ended:{record.id}")
