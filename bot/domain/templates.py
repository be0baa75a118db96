"""Cluster templates: a launched cluster's settings, kept under a name to quote from again.

A template keeps what a new launch needs to start from — the shape, location, storage,
orchestrator, planned hours, project, readiness rule, image, ports — and never a secret: the
workload's env values are sealed where they are stored, and a template keeps the env NAMES at
most (the launch form shows them with empty values to fill in).

Scope: a template is a person's own (`user:<id>`), or shared with a spend-policy team
(`team:<name>`), or with everyone (`team:*`, for a person in no team). A name is unique within
its scope; `/cluster quote template=<name>` finds the asker's own first, then a shared one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import datetime

from bot.domain.models import Frozen, IdleRule, ReadinessRule, Workload

MAX_NAME = 40
_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
EVERYONE = "*"


class ClusterTemplate(Frozen):
    id: str
    name: str
    scope: str  # user:<id> | team:<name> | team:*
    owner_id: str  # who saved it (may delete it)
    source_cluster_id: str
    accelerator: str  # catalog id
    gpus_per_node: int
    nodes: int
    location: str | None = None
    storage_gb: int | None = None
    root_disk_gb: int | None = None
    orchestrator: str = "none"
    hours: int | None = None
    project: str | None = None
    image: str | None = None
    ports: tuple[str, ...] = ()
    env_names: tuple[str, ...] = ()  # names only: values are secrets and stay with the cluster
    readiness: ReadinessRule | None = None
    idle: IdleRule | None = None  # the launch form's idle/done rule (bot/domain/idle.py)
    created_at: datetime

    @property
    def team(self) -> str | None:
        """The team it is shared with (`*`: everyone); None for a person's own."""
        return self.scope.removeprefix("team:") if self.scope.startswith("team:") else None

    def shape_words(self) -> str:
        return f"{self.nodes} × {self.accelerator} ×{self.gpus_per_node}"

    def quote_options(self) -> dict[str, str]:
        """The template as the options a quote would type (the parser checks them again)."""
        options = {"nodes": str(self.nodes), "orchestrator": self.orchestrator}
        for key, value in (("location", self.location), ("storage", self.storage_gb),
                           ("disk", self.root_disk_gb), ("hours", self.hours),
                           ("project", self.project)):
            if value is not None:
                options[key] = str(value)
        return options

    def launch_defaults(self) -> Workload:
        """What the launch form starts from: env names with empty values, never a value."""
        return Workload(image=self.image, ports=self.ports, readiness=self.readiness,
                        idle=self.idle, env=dict.fromkeys(self.env_names, ""))


def personal(user_id: str) -> str:
    return f"user:{user_id}"


def shared(team: str) -> str:
    return f"team:{team}"


def name_problem(name: str) -> str | None:
    """Why `name` can't name a template, in words; None when it can."""
    if not name:
        return "A template needs a name, e.g. `/cluster template save llama-serve clu_9xQe1`."
    if len(name) > MAX_NAME:
        return (f"`{name[:MAX_NAME]}…` is {len(name)} characters long; a template name is at "
                f"most {MAX_NAME}.")
    if not _NAME.match(name):
        return (f"`{name[:MAX_NAME]}`: a template name uses lower-case letters, digits, `-` and "
                "`_`, e.g. `llama-serve`.")
    return None


def visible_scopes(user_id: str, teams: Iterable[str]) -> tuple[str, ...]:
    """The scopes a person sees, in the order a name is looked up: their own, their teams',
    everyone's."""
    return (personal(user_id), *(shared(t) for t in sorted(teams)), shared(EVERYONE))


def pick(templates: Sequence[ClusterTemplate], name: str,
         scopes: Sequence[str]) -> ClusterTemplate | None:
    """The template called `name` in the first of `scopes` that has one."""
    by_scope = {t.scope: t for t in templates if t.name == name}
    return next((by_scope[s] for s in scopes if s in by_scope), None)
