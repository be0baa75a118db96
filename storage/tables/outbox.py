"""What the bot says in Slack: the watcher's notices and every other post (each claimed,
posted, then marked delivered), where each message lives to be edited, each person's DM
channel, and the storm digests with their members."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Field

from storage.tables.base import Base, default, metadata
from storage.types import UtcDateTime


class NoticeRow(Base, table=True):
    """The outbox of watcher notices (`bot.domain.watch.Notice`).

    UNIQUE (cluster_id, key) is the exactly-once guard: a transition seen again (next poll,
    restart, second replica) finds its key taken and is not announced twice. The integer id
    orders the outbox: notices are delivered in the order they were recorded.
    """

    __tablename__ = "notices"
    __table_args__ = (sa.UniqueConstraint("cluster_id", "key"),)

    id: int | None = Field(default=None, primary_key=True, sa_type=sa.Integer)
    cluster_id: str = Field(foreign_key="clusters.id", sa_type=sa.String)
    key: str = Field(sa_type=sa.String)
    kind: str = Field(sa_type=sa.String)
    facts: dict[str, Any] = Field(sa_type=sa.JSON)
    created_at: datetime = Field(sa_type=UtcDateTime)
    delivered_at: datetime | None = Field(default=None, index=True, sa_type=UtcDateTime)
    # Who is posting it now (added by 0005): one replica claims a notice before calling Slack;
    # a claim that outlives `claimed_until` (its replica died) may be taken over.
    claimed_by: str | None = Field(default=None, sa_type=sa.String)
    claimed_until: datetime | None = Field(default=None, sa_type=UtcDateTime)


NOTICES = metadata.tables["notices"]


class OutboxRow(Base, table=True):
    """Every other post, keyed by what it says to whom: claimed, posted, then marked delivered.

    `payload` (the message) is kept when another replica may have to post it after a failure;
    it is NULL for posts rebuilt at delivery time (SSH details are read from the provider then,
    never stored) and for message upserts (the key only guards the first chat.postMessage).
    """

    __tablename__ = "outbox"

    key: str = Field(primary_key=True, sa_type=sa.String)
    kind: str = Field(sa_type=sa.String)
    target: str = Field(sa_type=sa.String)  # a user (DM) or a channel
    payload: dict[str, Any] | None = Field(default=None, sa_type=sa.JSON(none_as_null=True))
    created_at: datetime = Field(sa_type=UtcDateTime)
    claimed_by: str | None = Field(default=None, sa_type=sa.String)
    claimed_until: datetime | None = Field(default=None, sa_type=UtcDateTime)
    delivered_at: datetime | None = Field(default=None, index=True, sa_type=UtcDateTime)
    attempts: int = Field(sa_type=sa.Integer, sa_column_kwargs=default(sa.text("0")))


OUTBOX = metadata.tables["outbox"]


class MessageRow(Base, table=True):
    """Where the Slack message for (kind, subject) lives, so the bot can edit it later."""

    __tablename__ = "messages"
    __table_args__ = (sa.UniqueConstraint("kind", "subject_id"),)

    id: int | None = Field(default=None, primary_key=True, sa_type=sa.Integer)
    kind: str = Field(sa_type=sa.String)
    subject_id: str = Field(sa_type=sa.String)
    channel_id: str = Field(sa_type=sa.String)
    ts: str = Field(sa_type=sa.String)
    created_at: datetime = Field(sa_type=UtcDateTime)
    updated_at: datetime = Field(sa_type=UtcDateTime)


MESSAGES = metadata.tables["messages"]


class DmChannelRow(Base, table=True):
    """The DM channel of each person (conversations.open once per user, not once per post)."""

    __tablename__ = "dm_channels"

    user_id: str = Field(primary_key=True, sa_type=sa.String)
    channel_id: str = Field(sa_type=sa.String)


DM_CHANNELS = metadata.tables["dm_channels"]


class DigestRow(Base, table=True):
    """A storm's one message in a channel (added by 0015). `open_channel` is the channel while
    the digest is open and NULL once closed: UNIQUE, so a channel has one open digest however
    many replicas open it at once."""

    __tablename__ = "digests"

    id: str = Field(primary_key=True, sa_type=sa.String)
    channel_id: str = Field(sa_type=sa.String)
    open_channel: str | None = Field(default=None, unique=True, sa_type=sa.String)
    opened_at: datetime = Field(sa_type=UtcDateTime)
    closed_at: datetime | None = Field(default=None, sa_type=UtcDateTime)
    shown: str | None = Field(default=None, sa_type=sa.String)  # digest of the last rendering


DIGESTS = metadata.tables["digests"]


class DigestMemberRow(Base, table=True):
    """A cluster in a storm's digest (added by 0015): joined once."""

    __tablename__ = "digest_members"

    digest_id: str = Field(primary_key=True, foreign_key="digests.id", sa_type=sa.String)
    cluster_id: str = Field(primary_key=True, foreign_key="clusters.id", sa_type=sa.String)
    joined_at: datetime = Field(sa_type=UtcDateTime)


DIGEST_MEMBERS = metadata.tables["digest_members"]
