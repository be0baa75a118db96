"""Budget locks: decisions that spend the same budget take turns.

A decision that commits money (an approval, an auto-approval) locks every budget it counts
against — the requester's and each of their teams' — before it reads what those budgets already
hold, and keeps the locks until its transaction ends. So N approvals at the same instant are
judged one after the other, each seeing the ones before it, and together they can never commit
more than the budget.

PostgreSQL: a transaction-scoped advisory lock per budget (`pg_advisory_xact_lock`, two-key form
in a namespace of its own), taken in sorted order so two decisions never wait on each other in a
cycle. SQLite: every transaction already holds the database's single write lock from its first
statement (`BEGIN IMMEDIATE`, storage/db.py), so there is nothing more to take.
"""

from __future__ import annotations

from collections.abc import Iterable

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

LOCK_NAMESPACE = 74102620  # the first key of every budget lock (int4); the second is the budget


def user_budget(user_id: str) -> str:
    return f"user:{user_id}"


def team_budget(team: str) -> str:
    return f"team:{team}"


def project_budget(project: str) -> str:
    return f"project:{project}"


class BudgetLocks:
    def __init__(self, session: AsyncConnection) -> None:
        self._session = session

    async def hold(self, budgets: Iterable[str]) -> None:
        """Lock `budgets` (see `user_budget`, `team_budget`) until this transaction ends."""
        if self._session.dialect.name != "postgresql":
            return  # SQLite: BEGIN IMMEDIATE already serialises every writer
        for key in sorted(set(budgets)):
            await self._session.execute(
                sa.text("SELECT pg_advisory_xact_lock(:namespace, hashtext(:budget))"),
                {"namespace": LOCK_NAMESPACE, "budget": key})
