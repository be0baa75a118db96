"""Slack's external file upload (what `files_upload_v2` does), in three steps:

1. `files.getUploadURLExternal(filename, length)` → an `upload_url` on this fake and a `file_id`;
2. a POST of the bytes to `upload_url` (no token: the URL is the credential);
3. `files.completeUploadExternal(files=[{id, title}], channel_id)` shares them in the channel,
   as a message carrying the files; a file never uploaded, or uploaded short, is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bot.devslack.methods import Args, Method, MethodStore, required
from bot.devslack.models import SlackError


@dataclass
class Upload:
    file_id: str
    filename: str
    length: int
    data: bytes | None = None
    title: str | None = None
    channel: str | None = None
    initial_comment: str | None = None


class FileStore:
    """Uploads by file id, and where this fake's upload URLs point."""

    def __init__(self) -> None:
        self.uploads: dict[str, Upload] = {}
        self.base_url = ""

    def receive(self, file_id: str, data: bytes) -> bool:
        upload = self.uploads.get(file_id)
        if upload is None or upload.data is not None:
            return False
        upload.data = data
        return True

    def shared_in(self, channel: str) -> list[Upload]:
        return [u for u in self.uploads.values() if u.channel == channel]


def _files(store: MethodStore) -> FileStore:
    files = getattr(store, "files", None)
    if not isinstance(files, FileStore):
        raise SlackError("not_supported", "this fake has no file store")
    return files


def get_upload_url_external(store: MethodStore, args: Args) -> dict[str, Any]:
    filename = required(args, "filename")
    try:
        length = int(required(args, "length"))
    except ValueError:
        raise SlackError("invalid_arguments", "length must be a whole number") from None
    if length < 1:
        raise SlackError("invalid_arguments", "length must be at least 1")
    files = _files(store)
    file_id = f"F{len(files.uploads) + 1:08d}"
    files.uploads[file_id] = Upload(file_id=file_id, filename=filename, length=length)
    return {"upload_url": f"{files.base_url}/upload/{file_id}", "file_id": file_id}


def complete_upload_external(store: MethodStore, args: Args) -> dict[str, Any]:
    items = args.get("files")
    if not isinstance(items, list) or not items:
        raise SlackError("invalid_arguments", "files must be a JSON list of {id, title}")
    files = _files(store)
    found = []
    for item in items:
        upload = files.uploads.get(str(item.get("id") if isinstance(item, dict) else item))
        if upload is None or upload.data is None or len(upload.data) != upload.length:
            raise SlackError("file_not_found", "a file was not uploaded (in full) first")
        found.append((upload, item))
    channel = store.resolve_channel(str(args["channel_id"])) if args.get("channel_id") else None
    comment = str(args.get("initial_comment") or "") or None
    for upload, item in found:
        upload.title = str(item.get("title") or upload.filename)
        upload.channel, upload.initial_comment = channel, comment
    if channel is not None:
        store.post(channel=channel, text=comment or "", blocks=[],
                   via="files.completeUploadExternal",
                   extra={"files": [{"id": u.file_id, "name": u.filename} for u, _ in found]})
    return {"files": [{"id": u.file_id, "name": u.filename, "title": u.title}
                      for u, _ in found]}


FILE_METHODS: Mapping[str, Method] = {
    "files.getUploadURLExternal": get_upload_url_external,
    "files.completeUploadExternal": complete_upload_external,
}
