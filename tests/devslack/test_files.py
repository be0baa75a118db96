"""FakeSlack's file uploads, driven by slack_sdk's own `files_upload_v2` (three steps: the
upload URL, the bytes POSTed to it, the completion that shares the file)."""

from __future__ import annotations

import aiohttp
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from devslack import FakeSlack

from .conftest import ALICE

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


async def test_files_upload_v2_is_recorded_with_its_bytes_and_place(slack: FakeSlack,
                                                                     client: AsyncWebClient):
    dm = (await client.conversations_open(users=ALICE))["channel"]["id"]
    answer = await client.files_upload_v2(channel=dm, file=PNG, filename="spend.png",
                                          title="Spend", initial_comment="here", alt_txt="chart")
    [upload] = slack.uploads.uploaded
    assert upload.data == PNG and upload.length == len(PNG)
    assert (upload.filename, upload.title, upload.channel) == ("spend.png", "Spend", dm)
    assert (upload.initial_comment, upload.alt_text) == ("here", "chart")
    assert answer["file"]["id"] == upload.id and slack.uploads.pending == {}
    methods = [c.method for c in slack.calls]
    assert methods[-2:] == ["files.getUploadURLExternal", "files.completeUploadExternal"]


async def test_a_thread_upload_keeps_its_thread(slack: FakeSlack, client: AsyncWebClient):
    await client.files_upload_v2(channel="C0GENERAL", thread_ts="1.000001", file=PNG,
                                 filename="hours.png", title="Hours")
    assert slack.uploads.uploaded[0].thread_ts == "1.000001"


async def test_completing_before_the_bytes_or_with_other_ids_is_refused(slack: FakeSlack,
                                                                         client: AsyncWebClient):
    step1 = await client.files_getUploadURLExternal(filename="a.png", length=len(PNG))
    with pytest.raises(SlackApiError) as early:
        await client.files_completeUploadExternal(files=[{"id": step1["file_id"]}])
    assert early.value.response["error"] == "upload_failed"
    async with aiohttp.ClientSession() as session, \
            session.post(step1["upload_url"], data=PNG[:10]) as posted:
        assert posted.status == 200
    with pytest.raises(SlackApiError) as short:
        await client.files_completeUploadExternal(files=[{"id": step1["file_id"]}])
    assert short.value.response["error"] == "file_upload_size_mismatch"
    with pytest.raises(SlackApiError) as unknown:
        await client.files_completeUploadExternal(files=[{"id": "F_NOPE"}])
    assert unknown.value.response["error"] == "file_not_found"
    with pytest.raises(SlackApiError) as bad:
        await client.files_getUploadURLExternal(filename="a.png", length=0)
    assert bad.value.response["error"] == "invalid_arguments"
    async with aiohttp.ClientSession() as session, \
            session.post(f"{slack.base_url}/upload/F_NOPE", data=PNG) as posted:
        assert posted.status == 404
    assert slack.uploads.uploaded == []


async def test_an_upload_to_an_unknown_channel_is_refused(slack: FakeSlack,
                                                          client: AsyncWebClient):
    with pytest.raises(SlackApiError) as caught:
        await client.files_upload_v2(channel="C0NOWHERE", file=PNG, filename="x.png")
    assert caught.value.response["error"] == "channel_not_found"
    assert slack.uploads.uploaded == []


async def test_the_local_screen_shows_a_shared_file(slack: FakeSlack, client: AsyncWebClient):
    import io

    from devslack.screen import Screen

    out = io.StringIO()
    slack.subscribe(Screen(slack, out).on_call)
    dm = (await client.conversations_open(users=ALICE))["channel"]["id"]
    await client.files_upload_v2(channel=dm, file=PNG, filename="s.png", title="Spend 2026-11")
    assert "📎 DM to @" in out.getvalue() and f"Spend 2026-11 ({len(PNG)} bytes" in out.getvalue()
