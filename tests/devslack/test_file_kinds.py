"""The local workspace names an uploaded file's kind from the file (as Slack's `filetype`):
the audit export is a CSV, a chart a PNG — issue 16 (a CSV was announced as "PNG")."""

from __future__ import annotations

import io

from slack_sdk.web.async_client import AsyncWebClient

from devslack import FakeSlack
from devslack.screen import Screen


async def test_a_csv_upload_is_announced_as_csv_and_a_png_as_png(slack: FakeSlack,
                                                                  client: AsyncWebClient):
    output = io.StringIO()
    unsubscribe = slack.subscribe(Screen(slack, output).on_call)
    try:
        await client.files_upload_v2(channel="C0GENERAL", content="at,actor\n", title="Audit",
                                     filename="audit-2026-11.csv")
        answer = await client.files_upload_v2(channel="C0GENERAL", file=b"\x89PNG\r\n\x1a\n",
                                              title="Chart", filename="spend.png")
    finally:
        unsubscribe()
    said = output.getvalue()
    assert "file Audit (9 bytes, CSV)" in said, said
    assert "file Chart (8 bytes, PNG)" in said, said
    assert answer["file"]["filetype"] == "png"
