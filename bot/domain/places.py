"""Which spend policy applies where: one deployment, several installations (issue 29).

A deployment serves one or more Slack installations (workspaces installed through OAuth, an
Enterprise organization installed org-wide, or the one workspace of SLACK_BOT_TOKEN). The policy
file's top level applies everywhere; its `installations:` section may give a workspace (`T…`) or
an organization (`E…`) a policy of its own — its approvals channel, approvers, admins, budgets,
limits — each section it lists replacing the top level's, the rest inherited
(bot/config/policy_file.py). A place is what a request, a launch request or a cluster says about
where it comes from: its workspace and, on Enterprise Grid, its organization. The workspace's
own policy first, then its organization's, then the top level. Pure.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Protocol

from pydantic import Field

from bot.domain.models import Frozen
from bot.domain.policy import Policy


class Placed(Protocol):
    """Anything that says where it comes from: an Actor, a LaunchRequest, a ClusterRecord."""

    @property
    def team_id(self) -> str | None: ...

    @property
    def enterprise_id(self) -> str | None: ...


class Place(Frozen):
    """A workspace and its organization (None outside Enterprise Grid)."""

    team_id: str | None = None
    enterprise_id: str | None = None


class Policies(Frozen):
    """The top level (`default`) and the policies of the installations the file names."""

    default: Policy
    places: Mapping[str, Policy] = Field(default_factory=dict)  # T… or E… → its own policy

    def key_for(self, where: Placed | None) -> str | None:
        """The `installations:` key whose policy applies at `where` (None: the top level)."""
        if where is None or not self.places:
            return None
        for key in (where.team_id, where.enterprise_id):
            if key and key in self.places:
                return key
        return None

    def for_place(self, where: Placed | None) -> Policy:
        key = self.key_for(where)
        return self.default if key is None else self.places[key]

    def all(self) -> Iterator[Policy]:
        """Every policy in force: the top level's first."""
        yield self.default
        yield from self.places.values()

    def with_channel(self, channel: str | None) -> Policies:
        """`channel` (APPROVALS_CHANNEL) wherever the file names no approvals channel."""
        if channel is None:
            return self

        def filled(policy: Policy) -> Policy:
            return policy if policy.approvals_channel else policy.model_copy(
                update={"approvals_channel": channel})

        return Policies(default=filled(self.default),
                        places={k: filled(p) for k, p in self.places.items()})
