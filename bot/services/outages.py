"""What the jobs may know of a database outage (they import services, never the domain)."""

from __future__ import annotations

from bot.domain.errors import StorageUnavailable


def is_storage_outage(exc: BaseException) -> bool:
    """The database is full, down or read-only: already logged once, where it was seen."""
    return isinstance(exc, StorageUnavailable)
