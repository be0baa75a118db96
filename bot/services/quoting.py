"""Quoting: resolve the accelerator against the catalog, check the shape, price, remember."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from bot.clock import Clock
from bot.domain import policies
from bot.domain.commands import SHORT_ACCELERATORS, USAGE, QuoteCommand
from bot.domain.errors import InvalidCommand
from bot.domain.models import Actor, PriceLine, QuoteInfo, QuoteOutlook, QuoteSpec, ShapeSpec
from bot.domain.policy import Policy, Verdict, shape_allowed
from bot.reserve import errors as api
from bot.reserve.port import ClusterProvider
from bot.reserve.schemas import Accelerator, Orchestrator, Quote
from bot.services.alternatives import nearest, stocked_locations
from bot.services.audit import AuditLog, audited
from bot.services.provider_errors import explain
from storage.db import Database

CATALOG_TTL = timedelta(minutes=10)

Judge = Callable[[QuoteInfo, str], Awaitable[Verdict]]


def _asked_shape(args: tuple[object, ...]) -> str:
    """A refused quote's subject: the shape asked for (it has no id; a channel is no subject)."""
    cmd = args[0] if args else None
    if not isinstance(cmd, QuoteCommand):
        return "?"
    return f"{cmd.accelerator}x{cmd.gpus_per_node} nodes={cmd.nodes}"


class QuotingService:
    """Turns `/cluster quote …` into a stored provider quote."""

    def __init__(self, *, provider: ClusterProvider, db: Database, clock: Clock,
                 audit: AuditLog) -> None:
        self._provider = provider
        self._db = db
        self._clock = clock
        self._audit = audit
        self.judge: Judge | None = None  # the spend policy's verdict (set by the runtime)
        # The spend policy where the quote is asked (People.policy; set by the runtime): the
        # lifetime `hours=` may not exceed, the projects, the shapes alternatives keep to.
        self.policy: Callable[[], Policy] = Policy
        # Why a person may not request at all (People.spend_refusal; set by the runtime).
        self.spend_refusal: Callable[[str], Awaitable[str | None]] | None = None
        self._catalog: list[Accelerator] = []
        self._catalog_at: datetime | None = None

    async def catalog(self, *, refresh: bool = False) -> list[Accelerator]:
        now = self._clock.now()
        fresh = self._catalog_at is not None and now - self._catalog_at < CATALOG_TTL
        if refresh or not fresh or not self._catalog:
            try:
                self._catalog = await self._provider.list_accelerators()
            except api.ApiError as exc:
                raise explain(exc) from exc
            self._catalog_at = now
        return self._catalog

    async def resolve(self, typed: str) -> Accelerator:
        """`h100` → `h100-sxm-80gb`; a full catalog id is taken as is."""
        catalog = [a for a in await self.catalog() if a.cluster_capable]
        exact = [a for a in catalog if a.id == typed]
        matches = exact or [a for a in catalog if a.id.startswith(typed + "-")]
        if len(matches) == 1:
            return matches[0]
        known = ", ".join(s for s in SHORT_ACCELERATORS
                          if any(a.id.startswith(s + "-") for a in catalog))
        if not matches:
            raise InvalidCommand(f"Unknown accelerator `{typed}`. Cluster accelerators: {known}.",
                                 bad_part=typed, usage=USAGE["quote"])
        raise InvalidCommand(f"`{typed}` matches several accelerators: "
                             f"{', '.join(a.id for a in matches)}; use the full id.",
                             bad_part=typed, usage=USAGE["quote"])

    @audited("quote", subject="channel_id", refused_subject=_asked_shape)
    async def quote(self, cmd: QuoteCommand, *, actor: Actor, channel_id: str) -> QuoteInfo:
        policy = self.policy()
        limit = policy.max_lifetime_hours
        if cmd.hours is not None and limit is not None and cmd.hours > limit:
            raise InvalidCommand(f"`hours={str(cmd.hours)[:20]}` is beyond the spend policy's "
                                 f"lifetime of {limit} hours per cluster; plan at most "
                                 f"`hours={limit}` (an approver can extend it later).",
                                 bad_part=f"hours={str(cmd.hours)[:20]}", usage=USAGE["quote"])
        if cmd.hours is not None and cmd.hours > policies.MAX_PLANNED_HOURS:
            raise InvalidCommand(f"`hours={str(cmd.hours)[:20]}` is more than a plan can cover: "
                                 f"at most {policies.MAX_PLANNED_HOURS:,} hours (10 years), "
                                 "e.g. `hours=72`.",
                                 bad_part=f"hours={str(cmd.hours)[:20]}", usage=USAGE["quote"])
        problem = policy.project_problem(cmd.project)
        if problem is not None:
            raise InvalidCommand(problem, bad_part=f"project={str(cmd.project)[:40]}",
                                 usage=USAGE["quote"])
        accelerator = await self.resolve(cmd.accelerator)
        policies.check_gpus_per_node(
            cmd.gpus_per_node, accelerator_label=accelerator.name,
            machine_max=accelerator.max_gpus_per_node, usage=USAGE["quote"],
        )
        spec = QuoteSpec(
            shape=ShapeSpec(accelerator=accelerator.id, gpus_per_node=cmd.gpus_per_node,
                            nodes=cmd.nodes),
            storage_gb=cmd.storage_gb, volume_id=cmd.volume_id, location=cmd.location,
            root_disk_gb=cmd.root_disk_gb, orchestrator=cmd.orchestrator,
            planned_hours=cmd.hours, project=cmd.project, template_id=cmd.template_id,
        )
        return await self.quote_spec(spec, accelerator_name=accelerator.name,
                                     requested_by=actor.user_id, channel_id=channel_id)

    async def outlook(self, quote: QuoteInfo) -> QuoteOutlook:
        """The policy's verdict on the person quoting and the shape's stock, for the card:
        a request that would be refused is said now, not after the launch form."""
        verdict = await self.judge(quote, quote.requested_by) if self.judge else None
        # Someone who may not request is told so on the card, with the rule, and offered no
        # form to fill in (a press of an older card is refused before the form too).
        barred = (await self.spend_refusal(quote.requested_by) if self.spend_refusal
                  else None)
        # No stock here: where else has it is read fresh, not from a ten-minute-old catalog.
        catalog = await self.catalog(refresh=quote.availability == "none")
        entry = next((a for a in catalog if a.id == quote.spec.shape.accelerator), None)
        # A mounted volume pins the cluster to the volume's location: no other place is offered.
        pinned = quote.location if quote.spec.volume_id else None
        elsewhere = (stocked_locations(entry, besides=quote.location)
                     if entry and pinned is None else ())
        shape = quote.spec.shape
        policy = self.policy()
        alternatives = (nearest(shape, catalog, at=pinned, allowed=lambda accelerator, nodes:
                                shape_allowed(policy, accelerator_id=accelerator, nodes=nodes))
                        if entry else ())
        gpu_rate = (entry.cluster.per_gpu_hourly_cents * shape.total_gpus
                    if entry is not None and entry.cluster is not None else None)
        single = entry.single_machine if entry is not None else None
        return QuoteOutlook(
            refused=barred or (verdict.refused if verdict else None),
            override=False if barred else (verdict.override if verdict else False),
            approvals_needed=verdict.approvals_needed if verdict else 1,
            auto_approve_below_cents=policy.auto_approve_below_cents,
            single_machine_per_gpu_cents=single.per_gpu_hourly_cents if single else None,
            stock_elsewhere=elsewhere, gpu_hourly_cents=gpu_rate, alternatives=alternatives,
            lifetime_hours=quote.spec.planned_hours or policy.max_lifetime_hours,
            envelope_terminates=quote.spec.planned_hours is not None or policy.enforce_lifetime)

    async def quote_instead(self, *, source_quote_id: str, accelerator: str,
                            gpus_per_node: int, nodes: int, location: str,
                            actor: Actor) -> tuple[QuoteInfo, QuoteOutlook]:
        """**Quote this** on an alternative: the same plan (the volume to mount or create, root
        disk, orchestrator, hours) priced on another accelerator or location, as a fresh quote
        with its outlook. The button carries only the shape; the plan is the stored quote's."""
        async with self._db.transaction() as repos:
            source = await repos.quotes.get(source_quote_id)
        if source is None:
            raise InvalidCommand("That quote card is no longer known; run `/cluster quote` again.",
                                 bad_part=source_quote_id, usage=USAGE["quote"])
        plan = source.spec
        cmd = QuoteCommand(accelerator=accelerator, gpus_per_node=gpus_per_node, nodes=nodes,
                           storage_gb=plan.storage_gb, volume_id=plan.volume_id,
                           # A mounted volume decides the place (a card from before this rule
                           # may carry another location).
                           location=source.location if plan.volume_id else location,
                           root_disk_gb=plan.root_disk_gb, orchestrator=plan.orchestrator,
                           hours=plan.planned_hours, project=plan.project,
                           template_id=plan.template_id)
        quote = await self.quote(cmd, actor=actor, channel_id=source.channel_id)
        return quote, await self.outlook(quote)

    async def quote_spec(self, spec: QuoteSpec, *, accelerator_name: str, requested_by: str,
                         channel_id: str) -> QuoteInfo:
        """Price a spec at the provider and store it (also used to re-quote for re-approval)."""
        try:
            wire = await self._provider.quote_cluster(
                spec.shape.accelerator, spec.shape.gpus_per_node, spec.shape.nodes,
                location=spec.location, root_disk_gb=spec.root_disk_gb,
                storage_gb=spec.storage_gb, volume_id=spec.volume_id,
                orchestrator=orchestrator_wire(spec.orchestrator),
            )
        except api.ApiError as exc:
            raise explain(exc, usage=USAGE["quote"], ident=spec.volume_id) from exc
        info = quote_info(wire, spec=spec, accelerator_name=accelerator_name,
                          requested_by=requested_by, channel_id=channel_id)
        async with self._db.transaction() as repos:
            await repos.quotes.add(info)
        return info


def quote_info(wire: Quote, *, spec: QuoteSpec, accelerator_name: str, requested_by: str,
               channel_id: str) -> QuoteInfo:
    b = wire.breakdown
    lines = [
        PriceLine(label="GPUs", detail=f"{b.gpus.count} × ${b.gpus.per_gpu_hourly_cents / 100:.2f}"
                  "/GPU-h", hourly_cents=b.gpus.hourly_cents),
        PriceLine(label="Root disks",
                  detail=f"{b.root_disks.count} × {b.root_disks.size_gb_each} GB",
                  hourly_cents=b.root_disks.hourly_cents),
    ]
    if b.shared_volume is not None:
        lines.append(PriceLine(label="Shared volume", detail=f"{b.shared_volume.size_gb} GB",
                               hourly_cents=b.shared_volume.hourly_cents))
    lines.append(PriceLine(label="Interconnect", detail="included",
                           hourly_cents=b.interconnect.hourly_cents))
    # The spec keeps what the provider actually priced (it picks a location when none was given).
    priced = spec.model_copy(update={"location": wire.location,
                                     "root_disk_gb": wire.root_disk_gb})
    return QuoteInfo(
        id=wire.id, spec=priced, accelerator_name=accelerator_name, location=wire.location,
        hourly_cents=wire.rate.hourly_cents, per_gpu_hourly_cents=wire.rate.per_gpu_hourly_cents,
        lines=tuple(lines), availability=wire.availability.value, created_at=wire.created_at,
        expires_at=wire.expires_at, requested_by=requested_by, channel_id=channel_id,
    )


def orchestrator_wire(orchestrator: str) -> Orchestrator | None:
    """The wire's `orchestrator`: omitted for the default topology, else slurm or ray."""
    if orchestrator == "slurm":
        return "slurm"
    if orchestrator == "ray":
        return "ray"
    return None
