"""The app's installations through Slack's OAuth flow (SLACK_CLIENT_ID and SLACK_CLIENT_SECRET
set), and the install page's states: both in the database, so any replica serves the install
page, another the redirect, and every one of them finds every installation.

Each request is served by the installation it comes from (`find`, as Bolt asks: organization,
workspace, user), and the channels and people it names are remembered as that installation's
(`learn`), so a call made later, outside any request (a sweep, the outbox), finds whose token
to carry (`route`); a stopped installation (its tokens revoked, the app uninstalled) is found but
called no more, and keeps its data. The single-token mode (SLACK_BOT_TOKEN) never comes here.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable, Collection
from datetime import timedelta

from bot.clock import Clock
from bot.domain.installation import Installation
from storage.db import Database

log = logging.getLogger(__name__)

STATE_TTL = timedelta(minutes=10)  # from the install page to Slack's redirect back
REFRESH_LEASE = timedelta(seconds=60)  # one replica refreshes an installation's token at a time
REFRESH_RETRY = timedelta(seconds=60)  # after a failed refresh, no replica tries before this
RETRY_HOLDER = "waiting after a failed refresh"  # the refresh lease's holder meanwhile

# oauth.v2.access with grant_type=refresh_token: (token, refresh token, seconds it lasts)
Exchange = Callable[[str], Awaitable[tuple[str, str, int]]]


class RefreshRefused(Exception):
    """Slack refused a token's refresh (`why`: its error, e.g. invalid_refresh_token)."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class Installations:
    def __init__(self, *, db: Database, clock: Clock, state_ttl: timedelta = STATE_TTL,
                 holder: str = "this replica") -> None:
        self._db = db
        self._clock = clock
        self._state_ttl = state_ttl
        self._holder = holder
        self.refresh_failures: Callable[[], None] = lambda: None  # metrics: one failed try

    async def refreshed(self, found: Installation, *, ahead: timedelta,
                        exchange: Exchange) -> Installation:
        """`found` with a token good for more than `ahead`: a rotating token about to expire is
        refreshed by one replica (a lease per installation); the others go on with the token
        they have (still good until it expires) and read the new one after. After a failure
        no replica tries again for REFRESH_RETRY (the lease is left to no one until then)."""
        due = found.bot_token_expires_at
        if found.bot_refresh_token is None or due is None or due - self._clock.now() > ahead:
            return found
        lease = f"token-refresh:{found.key}"
        async with self._db.transaction() as repos:
            mine = await repos.leases.acquire(lease, holder=self._holder, now=self._clock.now(),
                                              ttl=REFRESH_LEASE)
            current = await repos.installations.get(found.key)
        if current is None or current.bot_token_expires_at != due or not mine:
            return current or found  # refreshed meanwhile, or being refreshed elsewhere
        try:
            token, refresh, lasts = await exchange(found.bot_refresh_token)
        except Exception as exc:
            await self._refresh_failed(found, lease, why=exc.why if isinstance(
                exc, RefreshRefused) else type(exc).__name__)
            return found
        async with self._db.transaction() as repos:
            await repos.installations.rotated(
                found.key, token=token, refresh_token=refresh, expired_at=due,
                expires_at=self._clock.now() + timedelta(seconds=lasts))
            since = await repos.installations.refresh_working(found.key)
            fresh = await repos.installations.get(found.key)
            await repos.leases.release(lease, holder=self._holder)
        if since is not None:
            log.warning("the token of installation %s is refreshed again (its refresh failed "
                        "for %.0f s)", found.key, (self._clock.now() - since).total_seconds())
        return fresh or found

    async def _refresh_failed(self, found: Installation, lease: str, *, why: str) -> None:
        """Said once across replicas (the row records it); the next try after REFRESH_RETRY."""
        self.refresh_failures()
        now = self._clock.now()
        async with self._db.transaction() as repos:
            news = await repos.installations.refresh_failing(found.key, why=why, now=now)
            await repos.leases.release(lease, holder=self._holder)
            await repos.leases.acquire(lease, holder=RETRY_HOLDER, now=now, ttl=REFRESH_RETRY)
        if news:
            due = found.bot_token_expires_at
            log.error("could not refresh the token of installation %s (%s): it expires at %s, "
                      "then Slack refuses it and its calls stop; tried again every %.0f s. "
                      "If Slack said invalid_refresh_token, install the app again "
                      "(/slack/install)", found.key, why, due.isoformat() if due else "?",
                      REFRESH_RETRY.total_seconds())

    async def save(self, found: Installation) -> None:
        async with self._db.transaction() as repos:
            await repos.installations.save(found)
        log.info("installed in %s %s (%s)", "organization" if found.org_wide else "workspace",
                 found.key, found.name or "no name given")

    async def find(self, *, enterprise_id: str | None, team_id: str | None, org_wide: bool,
                   user_id: str | None = None) -> Installation | None:
        """The installation serving a request from (`enterprise_id`, `team_id`); with
        `user_id`, only if that person installed it (a person's own install, as Bolt asks)."""
        async with self._db.transaction() as repos:
            found = await repos.installations.find(enterprise_id=enterprise_id,
                                                   team_id=team_id, org_wide=org_wide)
        if found is not None and user_id is not None and found.installer_id != user_id:
            return None
        return found

    async def get(self, key: str) -> Installation | None:
        async with self._db.transaction() as repos:
            return await repos.installations.get(key)

    async def all(self) -> list[Installation]:
        async with self._db.transaction() as repos:
            return await repos.installations.all()

    async def stop(self, key: str, *, why: str) -> bool:
        """Call nothing more for `key`, keeping its data; said once (False: stopped already,
        or never installed)."""
        async with self._db.transaction() as repos:
            stopped = await repos.installations.stop(key, why=why, now=self._clock.now())
        if stopped:
            log.warning("installation %s stopped (%s): no more calls to Slack for it; its data "
                        "is kept, installing the app again starts it again", key, why)
        return stopped

    async def grant(self, key: str, team_ids: Collection[str]) -> None:
        """The org-wide installation `key` serves these workspaces of its organization too."""
        async with self._db.transaction() as repos:
            new = await repos.installations.grant(key, team_ids, now=self._clock.now())
        if new:
            log.info("organization %s: the app serves workspace(s) %s too", key,
                     ", ".join(sorted(new)))

    async def withdraw(self, key: str, team_ids: Collection[str]) -> None:
        """The org-wide installation `key` serves these workspaces no more (their data is
        kept; a request from one is refused)."""
        async with self._db.transaction() as repos:
            gone = await repos.installations.withdraw(key, team_ids)
        if gone:
            log.info("organization %s: the app no longer serves workspace(s) %s", key,
                     ", ".join(sorted(team_ids)))

    async def learn(self, key: str, targets: Collection[str]) -> None:
        """`targets` (channels, people, DM channels) belong to the installation `key`."""
        async with self._db.transaction() as repos:
            await repos.routes.learn(key, targets, now=self._clock.now())

    async def route(self, target: str) -> str | None:
        """The key of the installation `target` was learned from (None: never seen)."""
        async with self._db.transaction() as repos:
            return await repos.routes.route(target)

    async def issue_state(self) -> str:
        state = secrets.token_urlsafe(24)
        now = self._clock.now()
        async with self._db.transaction() as repos:
            await repos.oauth_states.issue(state, now=now, expires_at=now + self._state_ttl)
        return state

    async def consume_state(self, state: str) -> bool:
        """True once for a state this deployment issued that has not expired."""
        async with self._db.transaction() as repos:
            return await repos.oauth_states.consume(state, now=self._clock.now())
