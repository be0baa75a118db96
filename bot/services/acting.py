"""What every service that acts for people is built with, said once: the database (its own
transactions), the people (who may do what), the audit log and the clock.

A service adds its own collaborators and passes the rest on:

    def __init__(self, *, provider: ClusterProvider, **basics: Unpack[Basics]) -> None:
        super().__init__(**basics)
        self._provider = provider
"""

from __future__ import annotations

from typing import TypedDict

from bot.clock import Clock
from bot.domain.errors import DomainError
from bot.domain.models import Actor, ClusterRecord
from bot.services.audit import AuditLog
from bot.services.people import People
from storage.db import Database


class Basics(TypedDict):
    """The keyword arguments `ActingService.__init__` takes (for `**basics: Unpack[Basics]`)."""

    db: Database
    people: People
    audit: AuditLog
    clock: Clock


class ActingService:
    """A service whose actions are asked for by people, judged, and audited (`@audited`)."""

    def __init__(self, *, db: Database, people: People, audit: AuditLog, clock: Clock) -> None:
        self._db = db
        self._people = people
        self._audit = audit
        self._clock = clock

    async def _owner_or_approver(self, record: ClusterRecord, actor: Actor,
                                 refusal: str) -> None:
        """Raise `refusal` unless the actor owns `record` or is an approver (where `record`
        comes from: its installation's)."""
        if actor.user_id != record.owner_id and actor.user_id not in \
                await self._people.approvers_for(record):
            raise DomainError(refusal)
