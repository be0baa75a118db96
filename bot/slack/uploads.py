"""Charts to Slack: drawn off the event loop, uploaded with `files_upload_v2` (scope
`files:write`) to a person's DM or a cluster's thread."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime

from slack_sdk.web.async_client import AsyncWebClient

from bot.domain.spend import SpendReport
from bot.domain.spend_days import daily_cents


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
                           now: datetime) -> bool:
    """`/cluster spend`'s picture: the month by day and by owner, to the asker's DM (the
    figures are as private as the ephemeral report). False when nothing was billed."""
    if report.total_cents <= 0:
        return False
    days = daily_cents(report, now=now)
    owners = [(owner or "unclaimed", cents) for owner, cents in report.by_owner]

    def draw() -> bytes:
        from bot import charts  # matplotlib loads on the first chart, not at start-up

        return charts.spend_png(month=report.month, days=days, owners=owners,
                                total_cents=report.total_cents)

    await upload_png(client, draw=draw, filename=f"spend-{report.month}.png",
                     title=f"AI Reserve spend {report.month} by day and by owner",
                     comment=f"Spend for {report.month} by day and by owner (AI Reserve's "
                             "billed hours).", user_id=user_id)
    return True
