"""Charts to Slack: drawn off the event loop, uploaded with `files_upload_v2` (scope
`files:write`) to a person's DM or a cluster's thread."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.domain.hours import HourState
from bot.domain.models import ClusterRecord
from bot.domain.spend import SpendReport
from bot.domain.spend_days import daily_cents
from bot.slack.blocks.format import shape_label, truncate


async def upload_png(client: AsyncWebClient, *, draw: Callable[[], bytes], filename: str,
                     title: str, comment: str, user_id: str | None = None,
                     channel: str | None = None, thread_ts: str | None = None) -> None:
    """Draw in a worker thread (never on the event loop), then share the PNG in `channel`
    (in `thread_ts`'s thread when given) or, with `user_id`, in that person's DM."""
    png = await asyncio.to_thread(draw)
    if channel is None:
        assert user_id is not None, "a channel or a person to send the chart to"
        opened = await client.conversations_open(users=user_id)
        channel = str(opened["channel"]["id"])
    await client.files_upload_v2(channel=channel, thread_ts=thread_ts, file=png,
                                 filename=filename, title=title, initial_comment=comment,
                                 alt_txt=title)


async def send_spend_chart(client: AsyncWebClient, report: SpendReport, *, user_id: str,
                           now: datetime, by: str = "owner") -> bool:
    """`/cluster spend`'s picture: the month by day and by owner, to the asker's DM (the
    figures are as private as the ephemeral report). False when nothing was billed."""
    if report.total_cents <= 0:
        return False
    days = daily_cents(report, now=now)
    names = await display_names(client, [o for o, _ in report.by_owner if o is not None])
    owners = [(names.get(owner, owner) if owner else "unclaimed", cents)
              for owner, cents in report.by_owner]
    if by == "project":  # the same bars, one per project (spend on none together)
        owners = [(project or "no project", cents) for project, cents in report.by_project]

    def draw() -> bytes:
        from bot.slack import charts  # matplotlib loads on the first chart, not at start-up

        return charts.spend_png(month=report.month, days=days, owners=owners,
                                total_cents=report.total_cents, group=by)

    await upload_png(client, draw=draw, filename=f"spend-{report.month}.png",
                     title=f"AI Reserve spend {report.month} by day and by {by}",
                     comment=f"Spend for {report.month} by day and by {by} (AI Reserve's "
                             "billed hours).", user_id=user_id)
    return True


async def display_names(client: AsyncWebClient, user_ids: Sequence[str]) -> dict[str, str]:
    """The name Slack shows for each person (a PNG can't hold a mention): their display
    name, else their real name; the id itself when Slack can't say (never fails the chart)."""
    names: dict[str, str] = {}
    for user_id in dict.fromkeys(user_ids):
        try:
            found = (await client.users_info(user=user_id)).get("user") or {}
        except SlackApiError:
            continue
        profile = found.get("profile") or {}
        name = profile.get("display_name") or profile.get("real_name") or found.get("real_name")
        if name:
            names[user_id] = f"{name} ({user_id})" if list(names.values()).count(name) else name
    return names


@dataclass(frozen=True)
class Picture:
    """A chart a button answers with: how to draw it and what to call it."""

    draw: Callable[[], bytes]
    filename: str
    title: str


async def send_picture(client: AsyncWebClient, picture: Picture, *, body: dict[str, Any]) -> None:
    """Into the thread of the message whose button was pressed (its channel), else the
    presser's DM (a press from the App Home or an ephemeral)."""
    container = body.get("container") or {}
    channel = container.get("channel_id") if not container.get("is_ephemeral") else None
    thread = container.get("thread_ts") or container.get("message_ts")
    user = (body.get("user") or {}).get("id")
    await upload_png(client, draw=picture.draw, filename=picture.filename, title=picture.title,
                     comment=picture.title, channel=channel,
                     thread_ts=thread if channel else None, user_id=user)


def hours_picture(c: ClusterRecord, marks: Sequence[tuple[datetime, HourState]]) -> Picture:
    """The receipt's chart: the cluster's hour marks, degraded and not-serving ones marked."""
    # A picture is read without the message around it: the cluster's name, or its shape.
    plural = "s" if c.accrued_hours != 1 else ""
    title = (f"{truncate(c.name or shape_label(c.shape, c.accelerator_name), 60)} ({c.id}): "
             f"{c.accrued_hours} billed hour{plural}")

    def draw() -> bytes:
        from bot.slack import charts

        return charts.hours_png(title=title, hours=marks)

    return Picture(draw=draw, filename=f"hours-{c.id}.png", title=title)
