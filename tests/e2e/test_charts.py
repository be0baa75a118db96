"""`/cluster spend` sends its chart: drawn off the event loop, uploaded with files_upload_v2 to
the asker's DM, as FakeSlack records it."""

import io

import pytest

from tests.e2e.harness import ALICE, bot
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
