"""The app's installations (OAuth) and the install page's states, inside one transaction.

An installation is found as Bolt asks for it — by organization, workspace and (for a person's
own install) user — under one rule (`find`): an org-wide request is the organization's
installation; any other is its workspace's, or else, for a workspace of an organization the app
is installed in org-wide, the organization's. A new install of the same workspace (or org)
replaces the row and starts it again; a stopped one keeps its row. An org-wide installation
comes with the workspaces of its organization it serves (`slack_org_workspaces`).
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.domain.installation import Installation, installation_key
from storage.rows import row_values, to_domain
from storage.statements import insert, rowcount
from storage.tables.installs import INSTALLATIONS, OAUTH_STATES, ORG_WORKSPACES, ROUTES


class InstallationRepo:
    """The `slack_installations` table (see `storage.repositories`)."""

    def __init__(self, session: AsyncConnection) -> None:
        self._session = session

    async def save(self, found: Installation) -> None:
        """Store `found` under its key, replacing (and starting again) an earlier install."""
        values = {"key": found.key, **row_values(found)}
        del values["workspaces"]  # rows of their own (`grant`)
        stmt = insert(self._session, INSTALLATIONS).values(values)
        await self._session.execute(stmt.on_conflict_do_update(
            index_elements=["key"], set_={k: v for k, v in values.items() if k != "key"}))

    async def get(self, key: str) -> Installation | None:
        row = (await self._session.execute(
            sa.select(INSTALLATIONS).where(INSTALLATIONS.c.key == key))).mappings().first()
        if row is None:
            return None
        found = to_domain(Installation, row, skip=("key",))
        if not found.org_wide:
            return found
        teams = (await self._session.execute(sa.select(ORG_WORKSPACES.c.team_id).where(
            ORG_WORKSPACES.c.installation == key))).scalars().all()
        return found.model_copy(update={"workspaces": frozenset(teams)})

    async def grant(self, key: str, team_ids: Collection[str], *, now: datetime) -> set[str]:
        """The org-wide installation `key` serves `team_ids` too; returns the ones new to it."""
        known = set((await self._session.execute(sa.select(ORG_WORKSPACES.c.team_id).where(
            ORG_WORKSPACES.c.installation == key))).scalars().all())
        new = set(team_ids) - known
        for team in sorted(new):
            await self._session.execute(insert(self._session, ORG_WORKSPACES).values(
                installation=key, team_id=team, granted_at=now).on_conflict_do_nothing())
        return new

    async def withdraw(self, key: str, team_ids: Collection[str]) -> int:
        """The org-wide installation `key` serves `team_ids` no more; how many it served."""
        result = await self._session.execute(sa.delete(ORG_WORKSPACES).where(
            ORG_WORKSPACES.c.installation == key, ORG_WORKSPACES.c.team_id.in_(team_ids)))
        gone: int = result.rowcount
        return gone

    async def find(self, *, enterprise_id: str | None, team_id: str | None,
                   org_wide: bool) -> Installation | None:
        """The installation serving a request of (`enterprise_id`, `team_id`), stopped or not."""
        key = installation_key(enterprise_id=enterprise_id, team_id=team_id, org_wide=org_wide)
        found = None if key is None else await self.get(key)
        if found is None and enterprise_id and not org_wide:
            found = await self.get(enterprise_id)  # a workspace of an org-wide installation
            if found is not None and not found.org_wide:
                found = None
        if found is not None and enterprise_id and found.enterprise_id not in (None,
                                                                               enterprise_id):
            return None  # the payload says another organization: not this installation
        return found

    async def all(self) -> list[Installation]:
        keys = (await self._session.execute(sa.select(INSTALLATIONS.c.key).order_by(
            INSTALLATIONS.c.installed_at))).scalars().all()
        return [found for key in keys if (found := await self.get(key)) is not None]

    async def stop(self, key: str, *, why: str, now: datetime) -> bool:
        """Call nothing more for `key` (its tokens were revoked, the app uninstalled); the row
        and all its data stay. False: not installed, or stopped already."""
        return await rowcount(self._session, sa.update(INSTALLATIONS).where(
            INSTALLATIONS.c.key == key, INSTALLATIONS.c.stopped_at.is_(None),
        ).values(stopped_at=now, stopped_why=why)) == 1

    async def rotated(self, key: str, *, token: str, refresh_token: str, expires_at: datetime,
                      expired_at: datetime | None) -> bool:
        """Store a refreshed token pair, if the stored one still expires at `expired_at` (no
        other replica stored a newer pair meanwhile). False: someone else did."""
        return await rowcount(self._session, sa.update(INSTALLATIONS).where(
            INSTALLATIONS.c.key == key,
            INSTALLATIONS.c.bot_token_expires_at == expired_at if expired_at is not None
            else INSTALLATIONS.c.bot_token_expires_at.is_(None),
        ).values(bot_token=token, bot_refresh_token=refresh_token,
                 bot_token_expires_at=expires_at)) == 1

    async def refresh_failing(self, key: str, *, why: str, now: datetime) -> bool:
        """Its token's refresh fails (`why`); True if that is news (it worked before)."""
        return await rowcount(self._session, sa.update(INSTALLATIONS).where(
            INSTALLATIONS.c.key == key, INSTALLATIONS.c.refresh_failing_since.is_(None),
        ).values(refresh_failing_since=now, refresh_failure=why)) == 1

    async def refresh_working(self, key: str) -> datetime | None:
        """Its token's refresh works: since when it had failed (None: it hadn't)."""
        since = (await self._session.execute(
            sa.select(INSTALLATIONS.c.refresh_failing_since).where(
                INSTALLATIONS.c.key == key))).scalar_one_or_none()
        if since is None:
            return None
        changed = await rowcount(self._session, sa.update(INSTALLATIONS).where(
            INSTALLATIONS.c.key == key, INSTALLATIONS.c.refresh_failing_since == since,
        ).values(refresh_failing_since=None, refresh_failure=None))
        return since if changed == 1 else None


class RouteRepo:
    """The `slack_routes` table: which installation a channel or a person belongs to."""

    def __init__(self, session: AsyncConnection) -> None:
        self._session = session

    async def learn(self, key: str, targets: Collection[str], *, now: datetime) -> None:
        for target in sorted(targets):
            stmt = insert(self._session, ROUTES).values(target=target, installation=key,
                                                        learned_at=now)
            await self._session.execute(stmt.on_conflict_do_update(
                index_elements=["target"], set_={"installation": key, "learned_at": now}))

    async def route(self, target: str) -> str | None:
        return (await self._session.execute(sa.select(ROUTES.c.installation).where(
            ROUTES.c.target == target))).scalar_one_or_none()


class OAuthStateRepo:
    """The `slack_oauth_states` table: each state is taken back at most once."""

    def __init__(self, session: AsyncConnection) -> None:
        self._session = session

    async def issue(self, state: str, *, now: datetime, expires_at: datetime) -> None:
        await self._session.execute(sa.delete(OAUTH_STATES).where(
            OAUTH_STATES.c.expires_at <= now))  # the ones nobody came back with
        await self._session.execute(sa.insert(OAUTH_STATES).values(state=state,
                                                                   expires_at=expires_at))

    async def consume(self, state: str, *, now: datetime) -> bool:
        """True once for a state issued and not expired; False for any other (a replay)."""
        result = await self._session.execute(sa.delete(OAUTH_STATES).where(
            OAUTH_STATES.c.state == state, OAUTH_STATES.c.expires_at > now))
        taken: int = result.rowcount
        return taken == 1
