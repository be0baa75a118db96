"""Ports the services talk through (implemented in bot/slack and storage; twins in tests)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from bot.domain.connection import ConnectionDetails
from bot.domain.duty import Duty, Escalation
from bot.domain.installation import Installed
from bot.domain.models import ClusterRecord, VolumeRecord


class Notifier(Protocol):
    """What people see. Every method renders the *current* stored state, so calling it again
    (after a retry or a restart) edits the same Slack messages instead of posting new ones."""

    async def refresh_request(self, request_id: str, *,
                              superseded_quote_id: str | None = None) -> None:
        """Post or edit the request's approval card and its progress message; with
        `superseded_quote_id`, also retire the card of that older quote (no more buttons)."""
        ...

    async def refresh_cluster(self, cluster_id: str) -> None:
        """Edit the cluster's progress message to show its current state."""
        ...

    async def send_connection_details(self, cluster: ClusterRecord,
                                      details: ConnectionDetails) -> bool:
        """DM the owner, and only the owner, how to reach the nodes — once across replicas.
        True when they are sent (now or before); False while another replica sends them."""
        ...

    async def send_connection_again(self, cluster: ClusterRecord, details: ConnectionDetails,
                                    *, key: str) -> None:
        """`/cluster connect`: the same DM to the owner again, once per `key` (a re-send has a
        key of its own)."""
        ...

    async def deliver_notices(self) -> None:
        """Post every queued notice (thread replies, DMs) and mark each delivered."""
        ...

    async def remind_volume(self, volume: VolumeRecord, recipients: Sequence[str]) -> None:
        """DM what an orphaned volume costs, with Delete / Keep."""
        ...

    async def envelope_notice(self, cluster: ClusterRecord, *, stage: str, ends_at: datetime,
                              terminate_at: datetime | None,
                              recipients: Sequence[str]) -> None:
        """DM an envelope stage (warned, due, final) to these people."""
        ...

    async def envelope_extended(self, cluster: ClusterRecord, *, by: str, hours: int) -> None:
        """Note the extension in the cluster's thread."""
        ...

    async def refresh_extension(self, extension_id: str) -> None:
        """Post or edit a pending extension's card in the approvals channel (decided: its
        outcome, no buttons)."""
        ...

    async def refresh_home(self, user_id: str) -> None:
        """Re-publish one person's App Home tab."""
        ...

    async def tell(self, user_id: str, text: str, *, key: str | None = None) -> None:
        """A short direct message to one person, once per `key` (default: per text)."""
        ...


class Directory(Protocol):
    """Who is in a Slack user group (the spend policy's approvers and requesters), and who is a
    guest."""

    async def group_members(self, group_id: str) -> frozenset[str]:
        ...

    async def is_guest(self, user_id: str) -> bool:
        """A restricted or ultra-restricted account (a Slack guest)."""
        ...

    async def installed(self) -> Installed:
        """The workspace (or Enterprise organization) the app is installed in."""
        ...


class DutyNotifier(Protocol):
    """What people see of who is on a degraded cluster (bot/slack/duty.py)."""

    async def duty_changed(self, record: ClusterRecord, duty: Duty, *, event: str) -> None:
        """Edit the episode's degraded notice to show `duty`, and say what happened (`event`:
        "acknowledged" or "snoozed") once in the cluster's thread."""
        ...

    async def escalate(self, record: ClusterRecord, duty: Duty, kind: Escalation, *,
                       target: str, lost_cents: int, charges: int, after_minutes: int) -> None:
        """Tell `target` (a user group or a channel), once per episode and kind, and say so in
        the cluster's thread."""
        ...
