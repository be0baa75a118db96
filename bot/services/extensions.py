"""Extending a cluster's envelope, under the spend policy like a launch (bot/domain/extension.py
states the one rule).

`preview` judges an extension and changes nothing (the slash command's answer, with a Confirm).
`ask` judges it again inside one transaction, holding the owner's budget locks and counting what
they hold (bot/services/budgets.py): refused with the numbers, applied at once (a
compare-and-set on the envelope the asker saw), or stored as a pending extension whose card goes
to the approvals channel. `approve` records one approver per press on the locked row and, once
the tier is met, judges the budgets again under the same locks and applies it — a compare-and-
set on both the extension (pending → applied) and the envelope, so double presses and racing
approvers extend exactly once. What a card approves (the hours on the envelope it extends)
travels in its buttons (`ExtensionRef`) and must still match. Each is judged under the policy
of the cluster's installation (`at_cluster`), whoever asks or approves.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar, Unpack

from bot.domain import policy as rules
from bot.domain.errors import Conflict, NotAllowed, UnknownResource
from bot.domain.extension import (
    Extension,
    ExtensionJudgement,
    ExtensionStatus,
    judge_extension,
    may_approve,
    may_ask,
)
from bot.domain.models import Actor, ClusterRecord, Frozen
from bot.domain.ports import Notifier
from bot.services import budgets, stakes
from bot.services.acting import ActingService, Basics
from bot.services.audit import audited
from storage.repositories import Repos


class ExtendOutcome(Frozen):
    """What an ask did: `cluster` after it; `extension` is its card when approvers decide."""

    cluster: ClusterRecord
    judgement: ExtensionJudgement
    extension: Extension | None = None

    @property
    def applied(self) -> bool:
        return self.extension is None


P = ParamSpec("P")
T = TypeVar("T")
Method = Callable[Concatenate["ExtensionService", P], Coroutine[Any, Any, T]]


def at_cluster(method: Method[P, T]) -> Method[P, T]:
    """The method runs under the policy of its cluster's installation (`cluster_id=`, or the
    extension's: `extension_id=`): its approvers, budgets and approvals channel."""

    @functools.wraps(method)
    async def placed(service: ExtensionService, /, *args: P.args, **kwargs: P.kwargs) -> T:
        async with service._db.transaction() as repos:
            ext = await repos.extensions.get(str(kwargs["extension_id"])) \
                if "extension_id" in kwargs else None
            cluster_id = ext.cluster_id if ext is not None else kwargs.get("cluster_id")
            record = await repos.clusters.get(str(cluster_id)) if cluster_id else None
        with service._people.at(record):
            return await method(service, *args, **kwargs)

    return placed


class ExtensionService(ActingService):
    def __init__(self, *, notifier: Notifier, **basics: Unpack[Basics]) -> None:
        super().__init__(**basics)
        self._notifier = notifier

    @audited("extend", subject="cluster_id", refusals_only=True,
             stake=stakes.extension_asked)
    @at_cluster
    async def preview(self, *, cluster_id: str, actor: Actor,
                      hours: int) -> tuple[ClusterRecord, ExtensionJudgement]:
        """What extending would add and who decides; nothing changes. A refusal raises."""
        await self._people.ensure_may_spend(actor)
        is_approver = actor.user_id in await self._people.approvers()
        async with self._db.transaction() as repos:
            record = await _extendable(repos, cluster_id, actor, is_approver=is_approver)
            judgement = await self._judge(repos, record, actor, hours, is_approver=is_approver)
        return record, judgement

    @audited("extend", subject="cluster_id", refusals_only=True,
             stake=stakes.extension_asked)
    @at_cluster
    async def ask(self, *, cluster_id: str, actor: Actor, hours: int,
                  shown_hours: int | None = None) -> ExtendOutcome:
        """Extend now, or put it in front of the approvers, as the rule says (a confirmed
        Extend button or a slash command's Confirm). `shown_hours`: the envelope the asker saw;
        if it moved since, nothing happens and the answer says who extended it, to what."""
        await self._people.ensure_may_spend(actor)  # requesters, guests, the installed team
        is_approver = actor.user_id in await self._people.approvers()
        now = self._clock.now()
        async with self._db.transaction() as repos:
            record = await _extendable(repos, cluster_id, actor, is_approver=is_approver)
            if shown_hours is not None and record.lifetime_hours != shown_hours:
                raise Conflict(extended_already(record, shown_hours=shown_hours))
            assert record.owner_id is not None
            await budgets.hold(repos, self._people.policy, record.owner_id)
            j = await self._judge(repos, record, actor, hours, is_approver=is_approver)
            extension = None
            if j.applies_now:
                moved = await repos.clusters.extend_envelope(
                    cluster_id, from_hours=j.from_hours, to_hours=j.to_hours, by=actor.user_id,
                    now=now)
                if moved is None:
                    raise Conflict("Someone extended it at the same moment; look again and "
                                   "retry.")
                record = moved
            else:
                counts = j.preapproved and j.verdict.refused is None
                extension = Extension(
                    id=f"ex_{uuid.uuid4().hex[:12]}", cluster_id=cluster_id,
                    owner_id=record.owner_id, requested_by=actor.user_id, hours=hours,
                    from_hours=j.from_hours, hourly_cents=j.hourly_cents,
                    approvals_needed=j.verdict.approvals_needed,
                    override_rule=j.verdict.refused if j.verdict.override else None,
                    approved_by=(actor.user_id,) if counts else (), created_at=now,
                    updated_at=now)
                await repos.extensions.add(extension)
        if extension is None:
            how = ("auto-approved by the spend policy" if j.verdict.approvals_needed == 0
                   else f"approved by <@{actor.user_id}>, an approver")
            await self._applied(actor, record, hours=hours, how=how)
        else:
            await self._audit.write(
                actor=actor, action="extend_request", subject_id=extension.id, outcome="ok",
                amount_cents=j.added_cents,
                detail=f"{_amounts(extension)} asked for `{cluster_id}`; needs "
                       f"{_needs(extension)}")
            await self._notifier.refresh_extension(extension.id)
        return ExtendOutcome(cluster=record, judgement=j, extension=extension)

    @audited("approve_extension", subject="extension_id", refusals_only=True,
             stake=stakes.extension_sum)
    @at_cluster
    async def approve(self, *, extension_id: str, hours: int, from_hours: int,
                      actor: Actor) -> Extension:
        """One approver's yes on the card (bound to `hours` on the envelope `from_hours`);
        the last one needed applies the extension, the budgets judged again first."""
        policy = self._people.policy
        is_approver = actor.user_id in await self._people.approvers()
        now = self._clock.now()
        refusal: str | None = None
        async with self._db.transaction() as repos:
            ext = await _shown(repos, extension_id, hours=hours, from_hours=from_hours)
            admin_needed = ext.override_rule is not None and not any(
                a in policy.admin_ids for a in ext.approved_by)
            why_not = may_approve(policy, actor.user_id, owner=ext.owner_id,
                                  is_approver=is_approver, admin_needed=admin_needed,
                                  approved_by=frozenset(ext.approved_by))
            if why_not is not None:
                raise NotAllowed(why_not)
            approved_by = (*ext.approved_by, actor.user_id)
            admin_needed = ext.override_rule is not None and not any(
                a in policy.admin_ids for a in approved_by)
            if len(approved_by) < ext.approvals_needed or admin_needed:
                decided = await repos.extensions.decide(extension_id, now=now,
                                                        approved_by=approved_by)
            else:
                decided, refusal = await self._apply(repos, ext, approved_by, actor)
            assert decided is not None  # the row is locked and was pending
        if decided.status in (ExtensionStatus.PENDING, ExtensionStatus.APPLIED):
            # (refused or stale: the refusal below is this press's row)
            await self._audit.write(
                actor=actor, action="approve_extension", subject_id=extension_id, outcome="ok",
                amount_cents=decided.added_cents,
                detail=f"{len(decided.approved_by)} of {decided.approvals_needed} approvals for "
                       f"{_amounts(decided)} on `{decided.cluster_id}`")
        await self._notifier.refresh_extension(extension_id)  # the approval, then the effect
        if decided.status is ExtensionStatus.APPLIED:
            async with self._db.transaction() as repos:
                record = await repos.clusters.get(decided.cluster_id)
            assert record is not None
            await self._applied(actor, record, hours=decided.hours,
                                how=f"approved by {_mentions(decided.approved_by)}",
                                subject=decided.id)
        if refusal is not None:
            await self._audit.write(actor=None, action="budget", subject_id=extension_id,
                                    outcome="refused", amount_cents=decided.added_cents,
                                    detail=refusal)
            await self._notifier.tell(decided.owner_id, f"Extending `{decided.cluster_id}` "
                                      f"({_amounts(decided)}) was not applied: the spend "
                                      f"policy refused it when it was approved. {refusal}",
                                      key=f"extension-refused/{decided.id}")
            raise Conflict(f"Not extended: the spend policy refuses it now. {refusal}")
        if decided.status is ExtensionStatus.STALE:
            raise Conflict(f"Not extended: {decided.note}")
        return decided

    @audited("reject_extension", subject="extension_id", refusals_only=True,
             stake=stakes.extension_sum)
    @at_cluster
    async def reject(self, *, extension_id: str, hours: int, from_hours: int,
                     actor: Actor) -> Extension:
        """An approver says no (or the one who asked withdraws it): nothing is extended."""
        approvers = await self._people.approvers()
        async with self._db.transaction() as repos:
            ext = await _shown(repos, extension_id, hours=hours, from_hours=from_hours)
            if actor.user_id not in approvers and actor.user_id != ext.requested_by:
                raise NotAllowed("Only an approver (or whoever asked, to withdraw it) can "
                                 "reject an extension.")
            decided = await repos.extensions.decide(
                extension_id, now=self._clock.now(), status=ExtensionStatus.REJECTED,
                decided_by=actor.user_id)
            assert decided is not None
        await self._audit.write(actor=actor, action="reject_extension", subject_id=extension_id,
                                outcome="ok", amount_cents=decided.added_cents,
                                detail=f"rejected {_amounts(decided)} on `{decided.cluster_id}`")
        await self._notifier.refresh_extension(extension_id)
        if actor.user_id != decided.owner_id:
            await self._notifier.tell(decided.owner_id, f"<@{actor.user_id}> rejected extending "
                                      f"`{decided.cluster_id}` ({_amounts(decided)}).",
                                      key=f"extension-rejected/{decided.id}")
        return decided

    async def _judge(self, repos: Repos, record: ClusterRecord, actor: Actor, hours: int, *,
                     is_approver: bool) -> ExtensionJudgement:
        assert record.owner_id is not None
        now = self._clock.now()
        month = await budgets.committed(repos, self._people.policy, requester=record.owner_id,
                                        now=now, project=record.project)
        j = judge_extension(self._people.policy, cluster=record, hours=hours,
                            asker_is_approver=is_approver, asker=actor.user_id,
                            month_spend=month, now=now)
        if j.verdict.is_refusal:
            raise Conflict(f"The spend policy refuses extending `{record.id}` by {hours} h "
                           f"(+{rules.money(j.added_cents)}). {j.verdict.refused}")
        return j

    async def _apply(self, repos: Repos, ext: Extension, approved_by: tuple[str, ...],
                     actor: Actor) -> tuple[Extension | None, str | None]:
        """The last approval: the envelope unchanged since, the budgets still fit (locked) →
        applied; else stale or refused. Returns the decided extension and any refusal."""
        now = self._clock.now()
        policy = self._people.policy
        record = await repos.clusters.get(ext.cluster_id)
        if record is None or not record.status.is_live or record.lifetime_hours != ext.from_hours:
            note = (f"`{ext.cluster_id}` has ended." if record is None
                    or not record.status.is_live else extended_already(
                        record, shown_hours=ext.from_hours))
            return await repos.extensions.decide(ext.id, now=now, status=ExtensionStatus.STALE,
                                                 approved_by=approved_by, note=note), None
        refusal = None
        if ext.override_rule is None:
            await budgets.hold(repos, policy, ext.owner_id, record.project)
            month = await budgets.committed(repos, policy, requester=ext.owner_id, now=now,
                                            project=record.project)
            j = judge_extension(policy, cluster=record, hours=ext.hours, asker_is_approver=False,
                                asker=ext.requested_by, month_spend=month, now=now)
            refusal = j.verdict.refused
        if refusal is not None:
            return await repos.extensions.decide(
                ext.id, now=now, status=ExtensionStatus.REFUSED, approved_by=approved_by,
                decided_by=actor.user_id, note=refusal), refusal
        moved = await repos.clusters.extend_envelope(ext.cluster_id, from_hours=ext.from_hours,
                                                     to_hours=ext.to_hours,
                                                     by=actor.user_id, now=now)
        assert moved is not None  # checked just above, in this transaction
        return await repos.extensions.decide(ext.id, now=now, status=ExtensionStatus.APPLIED,
                                             approved_by=approved_by,
                                             decided_by=actor.user_id), None

    async def _applied(self, actor: Actor, record: ClusterRecord, *, hours: int, how: str,
                       subject: str | None = None) -> None:
        """The audit row (hours and dollars added, the new total) and the thread note."""
        assert record.lifetime_hours is not None
        added = record.hourly_cents * hours
        await self._audit.write(
            actor=actor, action="extend", subject_id=record.id, outcome="ok", amount_cents=added,
            detail=f"+{hours} h (+{rules.money(added)} at {rules.money(record.hourly_cents)}/h): "
                   f"envelope {record.lifetime_hours - hours} h → {record.lifetime_hours} h "
                   f"(≈ {rules.money(record.hourly_cents * record.lifetime_hours)} in all); "
                   f"{how}" + (f" (`{subject}`)" if subject else ""))
        await self._notifier.envelope_extended(record, by=actor.user_id, hours=hours)
        # Cards asking to extend the envelope it was can no longer apply: say so on them now.
        async with self._db.transaction() as repos:
            stale = [await repos.extensions.decide(
                e.id, now=self._clock.now(), status=ExtensionStatus.STALE,
                note=extended_already(record, shown_hours=e.from_hours))
                for e in await repos.extensions.pending(cluster_id=record.id)
                if e.from_hours != record.lifetime_hours]
        for e in stale:
            if e is not None:
                await self._notifier.refresh_extension(e.id)


async def _extendable(repos: Repos, cluster_id: str, actor: Actor, *,
                      is_approver: bool) -> ClusterRecord:
    record = await repos.clusters.require(cluster_id)
    why_not = may_ask(record, actor.user_id, asker_is_approver=is_approver)
    if why_not is not None:
        raise NotAllowed(why_not)
    if record.lifetime_hours is None or record.owner_id is None or not record.status.is_live:
        raise Conflict(f"`{cluster_id}` has no envelope to extend "
                       f"({'it has ended' if not record.status.is_live else 'no approved hours'}).")
    return record


async def _shown(repos: Repos, extension_id: str, *, hours: int, from_hours: int) -> Extension:
    """The pending extension, locked, if it is still what the card showed."""
    ext = await repos.extensions.get(extension_id, for_update=True)
    if ext is None:
        raise UnknownResource("extension", extension_id)
    if ext.status is not ExtensionStatus.PENDING:
        raise Conflict(already_decided(ext))
    if (ext.hours, ext.from_hours) != (hours, from_hours):
        raise Conflict("This card is out of date; use the newest card for this extension.")
    return ext


def extended_already(record: ClusterRecord, *, shown_hours: int) -> str:
    """Why a stale Extend changes nothing: who extended the envelope, to how many hours."""
    by = f" by <@{record.extended_by}>" if record.extended_by else ""
    return (f"Already extended{by} to {record.lifetime_hours} h (this button showed "
            f"{shown_hours} h); nothing more was extended.")


def already_decided(ext: Extension) -> str:
    by = f" by <@{ext.decided_by}>" if ext.decided_by else ""
    return {
        ExtensionStatus.APPLIED: f"Already approved{by}: `{ext.cluster_id}` may run "
                                 f"{ext.to_hours} h in all.",
        ExtensionStatus.REJECTED: f"Already rejected{by}; nothing was extended.",
        ExtensionStatus.REFUSED: f"The spend policy refused it when it was approved: {ext.note}",
        ExtensionStatus.STALE: f"Not extended: {ext.note}",
    }.get(ext.status, "This extension is waiting for an approver.")


def _amounts(ext: Extension) -> str:
    return (f"+{ext.hours} h ≈ {rules.money(ext.added_cents)}, envelope {ext.from_hours} h → "
            f"{ext.to_hours} h ≈ {rules.money(ext.total_cents)}")


def _needs(ext: Extension) -> str:
    if ext.override_rule:
        return f"a policy admin's override ({ext.override_rule})"
    given = f", {len(ext.approved_by)} given" if ext.approved_by else ""
    return f"{ext.approvals_needed} approver{'s' if ext.approvals_needed != 1 else ''}{given}"


def _mentions(users: tuple[str, ...]) -> str:
    return " and ".join(f"<@{u}>" for u in users)
