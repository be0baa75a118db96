"""The app's installations through Slack's OAuth flow (one row per workspace, or per Enterprise
organization for an org-wide install) and the OAuth states handed out by the install page."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Field

from storage.sealing import SealedText
from storage.tables.base import Base, metadata
from storage.types import UtcDateTime


class InstallationRow(Base, table=True):
    """`Installation`: the tokens sealed at rest; a stopped one keeps its row (and its data)."""

    __tablename__ = "slack_installations"

    key: str = Field(primary_key=True, sa_type=sa.String)  # org id (org-wide), else team id
    enterprise_id: str | None = Field(default=None, index=True, sa_type=sa.String)
    team_id: str | None = Field(default=None, index=True, sa_type=sa.String)
    org_wide: bool = Field(sa_type=sa.Boolean)
    app_id: str | None = Field(default=None, sa_type=sa.String)
    name: str = Field(sa_type=sa.String)
    bot_token: str = Field(sa_type=SealedText)
    bot_id: str | None = Field(default=None, sa_type=sa.String)
    bot_user_id: str | None = Field(default=None, sa_type=sa.String)
    bot_scopes: str = Field(sa_type=sa.Text)
    bot_refresh_token: str | None = Field(default=None, sa_type=SealedText)
    bot_token_expires_at: datetime | None = Field(default=None, sa_type=UtcDateTime)
    installer_id: str | None = Field(default=None, sa_type=sa.String)
    installed_at: datetime = Field(sa_type=UtcDateTime)
    stopped_at: datetime | None = Field(default=None, sa_type=UtcDateTime)
    stopped_why: str | None = Field(default=None, sa_type=sa.String)
    refresh_failing_since: datetime | None = Field(default=None, sa_type=UtcDateTime)
    refresh_failure: str | None = Field(default=None, sa_type=sa.String)


INSTALLATIONS = metadata.tables["slack_installations"]


class OAuthStateRow(Base, table=True):
    """One install page's `state`: taken back once, before it expires (any replica may serve
    the page and another the redirect)."""

    __tablename__ = "slack_oauth_states"

    state: str = Field(primary_key=True, sa_type=sa.String)
    expires_at: datetime = Field(sa_type=UtcDateTime)


OAUTH_STATES = metadata.tables["slack_oauth_states"]


class RouteRow(Base, table=True):
    """Which installation a Slack id (a channel, a person, a DM channel) belongs to, learned
    from the requests each installation serves: how a call made outside any request (a sweep,
    the outbox) finds whose token to carry. Slack's ids are unique across Slack."""

    __tablename__ = "slack_routes"

    target: str = Field(primary_key=True, sa_type=sa.String)
    installation: str = Field(sa_type=sa.String)  # the installation's key
    learned_at: datetime = Field(sa_type=UtcDateTime)


ROUTES = metadata.tables["slack_routes"]


class OrgWorkspaceRow(Base, table=True):
    """A workspace an org-wide installation serves: one its Enterprise organization's admins
    gave the app to (auth.teams.list at install; `team_access_granted` / `_revoked` after)."""

    __tablename__ = "slack_org_workspaces"

    installation: str = Field(primary_key=True, sa_type=sa.String)  # the installation's key
    team_id: str = Field(primary_key=True, sa_type=sa.String)
    granted_at: datetime = Field(sa_type=UtcDateTime)


ORG_WORKSPACES = metadata.tables["slack_org_workspaces"]
