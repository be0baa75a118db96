"""Issue 29, item 1: installations and OAuth states in the bot's database (SQLite and
PostgreSQL), the tokens sealed at rest, found per request by organization, workspace and user
through slack_sdk's installation store interface (what Bolt calls)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from slack_sdk.oauth.installation_store import Installation as SdkInstallation

from bot.clock import ManualClock
from bot.services.installations import STATE_TTL, Installations
from bot.slack.installs import DatabaseInstallationStore, DatabaseStateStore
from storage.sealing import PREFIX

NOW = datetime(2026, 12, 2, 9, 0, tzinfo=UTC)


def sdk(team: str | None, *, enterprise: str | None = None, org_wide: bool = False,
        token: str = "xoxb-one", user: str = "U0INSTALLER", **more) -> SdkInstallation:
    return SdkInstallation(app_id="A0001", enterprise_id=enterprise, team_id=team,
                           team_name=f"{team} name", enterprise_name=f"{enterprise} org",
                           bot_token=token, bot_id="B1", bot_user_id="UBOT",
                           bot_scopes=["commands", "chat:write"], user_id=user,
                           is_enterprise_install=org_wide,
                           installed_at=NOW.timestamp(), **more)


def stores(db):
    installations = Installations(db=db, clock=ManualClock(NOW))
    return installations, DatabaseInstallationStore(installations), DatabaseStateStore(
        installations)


async def test_each_workspace_is_found_with_its_own_token_sealed_at_rest(db):
    _, store, _ = stores(db)
    await store.async_save(sdk("T0ONE", token="xoxb-one-secret"))
    await store.async_save(sdk("T0TWO", token="xoxb-two-secret", user="U0OTHER"))
    one = await store.async_find_installation(enterprise_id=None, team_id="T0ONE")
    two = await store.async_find_bot(enterprise_id=None, team_id="T0TWO")
    assert (one.bot_token, one.team_name, one.bot_scopes) == (
        "xoxb-one-secret", "T0ONE name", ["commands", "chat:write"])
    assert (two.bot_token, two.bot_user_id) == ("xoxb-two-secret", "UBOT")
    assert await store.async_find_installation(enterprise_id=None, team_id="T0ELSE") is None
    # By the person: the installer's own, nobody else's.
    assert await store.async_find_installation(enterprise_id=None, team_id="T0ONE",
                                               user_id="U0INSTALLER") is not None
    assert await store.async_find_installation(enterprise_id=None, team_id="T0ONE",
                                               user_id="U0OTHER") is None
    async with db.engine.connect() as conn:
        raw = (await conn.execute(sa.text(
            "SELECT bot_token FROM slack_installations ORDER BY key"))).scalars().all()
    assert all(t.startswith(PREFIX) and "secret" not in t for t in raw)


async def test_an_org_wide_install_serves_every_workspace_of_its_organization(db):
    _, store, _ = stores(db)
    await store.async_save(sdk(None, enterprise="E0ORG", org_wide=True, token="xoxb-org"))
    for team, org_wide in (("T0A", True), ("T0B", False), (None, True)):
        found = await store.async_find_installation(enterprise_id="E0ORG", team_id=team,
                                                    is_enterprise_install=org_wide)
        assert found is not None and found.bot_token == "xoxb-org", team
        assert found.is_enterprise_install and found.enterprise_name == "E0ORG org"
    assert await store.async_find_installation(enterprise_id="E0OTHER", team_id="T0A") is None
    # A workspace installed on its own is not the organization's.
    await store.async_save(sdk("T0C", enterprise="E0OTHER", token="xoxb-c"))
    assert await store.async_find_installation(enterprise_id="E0OTHER", team_id="T0D") is None
    found = await store.async_find_installation(enterprise_id="E0OTHER", team_id="T0C")
    assert found.bot_token == "xoxb-c"


async def test_an_uninstalled_workspace_is_found_no_more_and_keeps_its_row(db):
    installations, store, _ = stores(db)
    await store.async_save(sdk("T0ONE"))
    await store.async_delete_installation(enterprise_id=None, team_id="T0ONE")
    assert await store.async_find_installation(enterprise_id=None, team_id="T0ONE") is None
    kept = await installations.get("T0ONE")
    assert (kept.stopped_at, kept.stopped_why, kept.bot_token) == (NOW, "app_uninstalled",
                                                                   "xoxb-one")
    assert not await installations.stop("T0ONE", why="tokens_revoked")  # said once
    await store.async_save(sdk("T0ONE", token="xoxb-again"))  # installing again restarts it
    again = await store.async_find_installation(enterprise_id=None, team_id="T0ONE")
    assert again.bot_token == "xoxb-again"


async def test_rotating_tokens_are_stored_with_their_expiry(db):
    installations, store, _ = stores(db)
    expires = int((NOW + timedelta(hours=12)).timestamp())
    await store.async_save(sdk("T0ONE", token="xoxe.xoxb-1", bot_refresh_token="xoxe-1-r",
                               bot_token_expires_at=expires))
    found = await installations.get("T0ONE")
    assert (found.bot_refresh_token, found.bot_token_expires_at) == (
        "xoxe-1-r", NOW + timedelta(hours=12))
    bot = await store.async_find_bot(enterprise_id=None, team_id="T0ONE")
    assert (bot.bot_refresh_token, bot.bot_token_expires_at) == ("xoxe-1-r", expires)


async def test_a_state_is_taken_back_once_and_not_after_it_expired(db):
    installations, _, states = stores(db)
    first, second = await states.async_issue(), await states.async_issue()
    assert first != second
    assert await states.async_consume(first)
    assert not await states.async_consume(first)  # a replay
    assert not await states.async_consume("made-up")
    installations._clock.advance(STATE_TTL.total_seconds())
    assert not await states.async_consume(second)  # expired


async def test_an_org_wide_installation_keeps_the_workspaces_it_was_given(db):
    installations, store, _ = stores(db)
    await store.async_save(sdk(None, enterprise="E0ORG", org_wide=True, token="xoxb-org"))
    await store.async_save(sdk("T0SOLO"))
    await installations.grant("E0ORG", ["T0A", "T0B"])
    await installations.grant("E0ORG", ["T0B", "T0C"])  # again: once each
    await installations.withdraw("E0ORG", ["T0A", "T0NEVER"])
    org = await installations.find(enterprise_id="E0ORG", team_id="T0B", org_wide=True)
    assert org is not None and org.workspaces == {"T0B", "T0C"}
    assert org.installed.workspaces == {"T0B", "T0C"}
    solo = await installations.get("T0SOLO")
    assert solo is not None and solo.installed.workspaces is None  # one workspace: its own
    assert {i.key: i.workspaces for i in await installations.all()} == {
        "E0ORG": {"T0B", "T0C"}, "T0SOLO": frozenset()}
    await store.async_save(sdk(None, enterprise="E0ORG", org_wide=True, token="xoxb-again"))
    again = await installations.get("E0ORG")  # installed again: what it was given stays
    assert again is not None and again.workspaces == {"T0B", "T0C"}
