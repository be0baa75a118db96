"""FakeSlack's file uploads, the way `files_upload_v2` does them (Slack's "external" upload):

1. `files.getUploadURLExternal(filename, length)` → `{upload_url, file_id}`;
2. a POST of the bytes to that URL (served here on `/upload/{file_id}`, no token: the URL is
   the secret, as at Slack);
3. `files.completeUploadExternal(files=[{id, title}], channel_id?, thread_ts?,
   initial_comment?)` → `{files: [...]}`: the file is shared, and recorded in `uploaded`.

A file completed before its bytes arrived, or whose bytes differ in length from what was
announced, is refused as Slack refuses it. Kept in its own module so FakeSlack's other
methods stay as they were.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from devslack.models import SlackError

Args = Mapping[str, Any]
MAX_BYTES = 1_000_000_000  # Slack's limit is 1 GB


@dataclass
class UploadedFile:
    id: str
    filename: str
    length: int
    data: bytes | None = None
    title: str | None = None
    channel: str | None = None
    thread_ts: str | None = None
    initial_comment: str | None = None
    alt_text: str | None = None
    ts: str | None = None  # when it was shared (a message ts: where it shows in the channel)


@dataclass
class FileUploads:
    """The pending and the completed uploads; `base_url` is set once FakeSlack serves."""

    base_url: str = ""
    pending: dict[str, UploadedFile] = field(default_factory=dict)
    uploaded: list[UploadedFile] = field(default_factory=list)

    def shared_in(self, channel: str) -> list[UploadedFile]:
        """The files shared in `channel`, oldest first."""
        return [f for f in self.uploaded if f.channel == channel]

    def methods(self) -> dict[str, Callable[[Any, Args], dict[str, Any]]]:
        return {"files.getUploadURLExternal": self.get_upload_url,
                "files.completeUploadExternal": self.complete}

    def get_upload_url(self, store: Any, args: Args) -> dict[str, Any]:
        filename = str(args.get("filename") or "")
        length = str(args.get("length") or "")
        if not filename:
            raise SlackError("invalid_arguments", "filename is required")
        if not length.isdigit() or not 0 < int(length) <= MAX_BYTES:
            raise SlackError("invalid_arguments", "length must be a positive byte count")
        file_id = f"F{len(self.pending) + len(self.uploaded) + 1:08d}"
        self.pending[file_id] = UploadedFile(id=file_id, filename=filename, length=int(length),
                                             alt_text=args.get("alt_txt"))
        return {"upload_url": f"{self.base_url}/upload/{file_id}", "file_id": file_id}

    async def receive(self, request: web.Request) -> web.Response:
        """Step 2: the bytes, POSTed to the URL step 1 gave."""
        upload = self.pending.get(request.match_info["file_id"])
        if upload is None:
            return web.Response(status=404, text="unknown upload")
        upload.data = await request.read()
        return web.Response(text=f"OK - {len(upload.data)}")

    def complete(self, store: Any, args: Args) -> dict[str, Any]:
        raw = args.get("files")
        files = json.loads(raw) if isinstance(raw, str) else raw
        if not isinstance(files, list) or not files:
            raise SlackError("invalid_arguments", "files must be a list of {id, title}")
        channel = args.get("channel_id") or None
        if channel is not None:
            channel = store.resolve_channel(str(channel))
        done = []
        for entry in files:
            upload = self.pending.get(str(entry.get("id")))
            if upload is None:
                raise SlackError("file_not_found")
            if upload.data is None or len(upload.data) != upload.length:
                raise SlackError("file_upload_size_mismatch" if upload.data else "upload_failed")
            del self.pending[upload.id]
            upload.title = entry.get("title") or upload.filename
            upload.channel, upload.thread_ts = channel, args.get("thread_ts") or None
            upload.initial_comment = args.get("initial_comment") or None
            upload.ts = store.next_ts()
            self.uploaded.append(upload)
            # As Slack does: the type from the name's extension (`csv`, `png`; else `binary`).
            ext = upload.filename.rpartition(".")[2].lower() if "." in upload.filename else ""
            done.append({"id": upload.id, "name": upload.filename, "title": upload.title,
                         "size": upload.length, "filetype": ext or "binary"})
        return {"files": done}
