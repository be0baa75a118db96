"""Cluster templates: saved from a launched cluster's settings, listed, deleted, quoted from.

What a template keeps is bot/domain/templates.py's business (never an env value). Saving reads
the cluster, the request it was launched for (the workload: image, ports, env names, readiness
and idle rules) and that request's quote (storage, root disk, orchestrator, planned hours); an
adopted cluster has neither, so its template holds the shape and the place only.
"""

from __future__ import annotations

import uuid
from typing import Unpack

from sqlalchemy.exc import IntegrityError

from bot.domain import templates as rules
from bot.domain.commands import USAGE
from bot.domain.errors import InvalidCommand, NotAllowed
from bot.domain.models import Actor, QuoteInfo, Workload
from bot.domain.ports import Notifier
from bot.domain.templates import ClusterTemplate
from bot.services.acting import ActingService, Basics
from bot.services.audit import audited


class TemplateService(ActingService):
    def __init__(self, *, notifier: Notifier, **basics: Unpack[Basics]) -> None:
        super().__init__(**basics)
        self._notifier = notifier

    def _scopes(self, user_id: str) -> tuple[str, ...]:
        teams = [t.name for t in self._people.policy.teams_of(user_id)]
        return rules.visible_scopes(user_id, teams)

    def _scope(self, user_id: str, team: str | None) -> str:
        """Where a template saved by `user_id` goes: their own, or shared (`team`: "" for
        their one team, or everyone when they are in none)."""
        if team is None:
            return rules.personal(user_id)
        mine = sorted(t.name for t in self._people.policy.teams_of(user_id))
        if team == "":
            if len(mine) > 1:
                raise InvalidCommand(f"You are in several teams ({', '.join(mine)}); say which "
                                     "one to share with: `team=<name>`.", bad_part="shared",
                                     usage=USAGE["template"])
            return rules.shared(mine[0] if mine else rules.EVERYONE)
        if team not in mine:
            known = f"yours: {', '.join(mine)}" if mine else "you are in no team of the policy"
            raise InvalidCommand(f"You can share only with a team you are in; `{team[:40]}` is "
                                 f"not one ({known}).", bad_part=f"team={team[:40]}",
                                 usage=USAGE["template"])
        return rules.shared(team)

    @audited("save_template", subject="cluster_id")
    async def save(self, *, name: str, cluster_id: str, team: str | None,
                   actor: Actor) -> ClusterTemplate:
        problem = rules.name_problem(name)
        if problem is not None:
            raise InvalidCommand(problem, bad_part=name[:rules.MAX_NAME] or "name",
                                 usage=USAGE["template"])
        scope = self._scope(actor.user_id, team)
        async with self._db.transaction() as repos:
            record = await repos.clusters.require(cluster_id)
            if (record.owner_id != actor.user_id
                    and actor.user_id not in await self._people.approvers()):
                raise NotAllowed(f"Only `{cluster_id}`'s owner or an approver can save its "
                                 "settings as a template.")
            request = (await repos.requests.get(record.request_id)
                       if record.request_id else None)
            quote = await repos.quotes.get(request.quote_id) if request else None
            if any(t.name == name for t in await repos.templates.in_scopes([scope])):
                raise _taken(name, scope)
        workload = request.workload if request else Workload()
        spec = quote.spec if quote else None
        template = ClusterTemplate(
            id=f"tpl_{uuid.uuid4().hex[:12]}", name=name, scope=scope, owner_id=actor.user_id,
            source_cluster_id=record.id, accelerator=record.shape.accelerator,
            gpus_per_node=record.shape.gpus_per_node, nodes=record.shape.nodes,
            location=record.location, storage_gb=spec.storage_gb if spec else None,
            root_disk_gb=spec.root_disk_gb if spec else None,
            orchestrator=spec.orchestrator if spec else "none",
            hours=spec.planned_hours if spec else None, project=record.project,
            image=workload.image, ports=workload.ports,
            env_names=tuple(sorted(workload.env)),  # names only: the values are secrets
            readiness=workload.readiness, idle=workload.idle, created_at=self._clock.now())
        try:
            async with self._db.transaction() as repos:
                await repos.templates.add(template)
        except IntegrityError:  # saved under the same name at the same instant
            raise _taken(name, scope) from None
        await self._notifier.refresh_home(actor.user_id)
        return template

    async def visible(self, user_id: str) -> list[ClusterTemplate]:
        """The templates `user_id` may quote from: their own, their teams', everyone's."""
        async with self._db.transaction() as repos:
            return await repos.templates.in_scopes(self._scopes(user_id))

    async def find(self, *, name: str, actor: Actor) -> ClusterTemplate:
        """The template `name` as `actor` sees it (their own first), or a clear answer."""
        scopes = self._scopes(actor.user_id)
        found = rules.pick(await self.visible(actor.user_id), name, scopes)
        if found is None:
            raise InvalidCommand(f"I don't know a template `{name[:rules.MAX_NAME]}`; "
                                 "`/cluster template list` shows the ones you can use.",
                                 bad_part=f"template={name[:rules.MAX_NAME]}",
                                 usage=USAGE["template"])
        return found

    async def launch_defaults(self, quote: QuoteInfo) -> Workload | None:
        """The launch form's start for a quote made from a template (a local read: the form
        must open within Slack's 3 s); None when there is none (or it was deleted since)."""
        if quote.spec.template_id is None:
            return None
        async with self._db.transaction() as repos:
            template = await repos.templates.get(quote.spec.template_id)
        return template.launch_defaults() if template is not None else None

    @audited("delete_template", subject="name")
    async def delete(self, *, name: str, actor: Actor) -> ClusterTemplate:
        template = await self.find(name=name, actor=actor)
        admins = self._people.policy.admin_ids
        if template.owner_id != actor.user_id and actor.user_id not in admins:
            raise NotAllowed(f"Only <@{template.owner_id}>, who saved `{template.name}`, or a "
                             "policy admin can delete it.")
        async with self._db.transaction() as repos:
            if not await repos.templates.delete(template.id):
                raise InvalidCommand(f"`{name}` was deleted meanwhile.", bad_part=name,
                                     usage=USAGE["template"])
        await self._notifier.refresh_home(actor.user_id)
        return template


def _taken(name: str, scope: str) -> InvalidCommand:
    where = "your templates" if scope.startswith("user:") else (
        "everyone's templates" if scope == rules.shared(rules.EVERYONE)
        else f"team {scope.removeprefix('team:')}'s templates")
    return InvalidCommand(f"A template `{name}` already exists in {where}; pick another name or "
                          f"delete it first (`/cluster template delete {name}`).",
                          bad_part=name, usage=USAGE["template"])
