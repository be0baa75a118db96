"""`/cluster spend` sends its chart: drawn off the event loop, uploaded with files_upload_v2 to
the asker's DM, as FakeSlack records it."""

import io

import pytest

from bot.domain.hours import HourState
from bot.slack import charts
from bot.slack.ids import Action
from tests.e2e.harness import ALICE, BOB, CAROL, bot
from tests.e2e.test_buttons import told

Image = pytest.importorskip("PIL.Image")


async def test_spend_uploads_a_chart_to_the_askers_dm(tmp_path):
    async with bot(tmp_path) as h:
        await h.running_cluster()
        await h.advance(3 * 3600)
        await h.slash("spend")
        h.last_ephemeral(ALICE, containing="Spend for")
        [upload] = h.slack.uploads.uploaded
        assert upload.channel == h.slack.dm_channel(ALICE)
        assert upload.filename.startswith("spend-") and upload.filename.endswith(".png")
        image = Image.open(io.BytesIO(upload.data))
        assert image.size == (1000, 600)
        assert len(image.convert("RGB").getcolors(maxcolors=1 << 20)) > 50
        methods = [c.method for c in h.slack.calls]
        assert "files.getUploadURLExternal" in methods
        assert "files.completeUploadExternal" in methods


async def test_nothing_billed_sends_no_chart_and_a_refused_upload_is_said(tmp_path):
    async with bot(tmp_path) as h:
        await h.slash("spend")
        assert told(h, ALICE, "Nothing was billed")
        assert h.slack.uploads.uploaded == []

        await h.running_cluster()
        h.slack.fail_next("files.completeUploadExternal", error="not_allowed_token_type")
        await h.slash("spend")
        assert told(h, ALICE, "The spend chart could not be sent (not_allowed_token_type)")
        assert h.slack.uploads.uploaded == []


def has_colour(image, hex_colour):
    rgb = tuple(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5))
    return rgb in {c for _, c in image.convert("RGB").getcolors(maxcolors=1 << 20)}


async def test_receipt_chart_marks_degraded_hours_in_the_thread_once(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id = await h.running_cluster()
        await h.advance(2 * 3600)
        await h.fail_node(cluster_id, rank=1)
        await h.advance(2 * 3600)
        await h.click(await h.top(cluster_id), Action.TERMINATE, user=ALICE)
        await h.advance(60)
        [receipt] = await h.notices(cluster_id, "Receipt")
        h.slack.fail_next("files.completeUploadExternal", error="internal_error")
        await h.click(receipt, Action.HOURS_CHART, user=BOB)
        assert h.slack.uploads.uploaded == []  # refused: the press may be tried again
        await h.click(receipt, Action.HOURS_CHART, user=BOB)
        [upload] = h.slack.uploads.uploaded
        top = await h.top(cluster_id)
        assert (upload.channel, upload.thread_ts) == (top.channel, top.ts)
        image = Image.open(io.BytesIO(upload.data))
        assert image.size == (1000, 300)
        assert has_colour(image, charts.HOUR_COLOURS[HourState.DEGRADED])
        assert has_colour(image, charts.HOUR_COLOURS[HourState.BILLED])
        assert told(h, BOB, "billed hours is in the thread")
        await h.click(receipt, Action.HOURS_CHART, user=CAROL)
        assert told(h, CAROL, f"Already drawn for <@{BOB}>")
        assert len(h.slack.uploads.uploaded) == 1
