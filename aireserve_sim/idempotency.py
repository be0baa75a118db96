"""`Idempotency-Key` bookkeeping for the simulator server (contract §8).

Keys live per API key for 24 h of ENGINE time. A key remembers the request it was first used
with — method, path and canonical JSON body (sorted keys, no whitespace) — so:

- same key, same request, finished  → the stored status and body are replayed;
- same key, same request, unfinished → 409 idempotency_key_in_use;
- same key, anything else different  → 422 idempotency_key_reused.

Only answers produced after execution began are stored (2xx, 409 capacity_unavailable, 5xx);
an early rejection releases the key so the corrected request can use it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from bot.reserve.errors import IdempotencyKeyInUse, IdempotencyKeyReused, InvalidRequest

TTL = timedelta(hours=24)
MAX_KEY_LENGTH = 255
# Headers worth replaying besides the body; request ids and rate-limit state are per request.
REPLAYED_HEADERS = ("Location",)


def validate_key(raw: str | None) -> str | None:
    """The header's value, or None when absent; 400 when present but not 1–255 characters."""
    if raw is None:
        return None
    if not 1 <= len(raw) <= MAX_KEY_LENGTH:
        raise InvalidRequest(
            f"Idempotency-Key must be 1 to {MAX_KEY_LENGTH} characters (got {len(raw)}).",
            details={"field": "Idempotency-Key", "reason": "invalid_idempotency_key"},
        )
    return raw


def canonical_body(body: Any) -> str:
    """Key order and whitespace do not make two bodies different."""
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def is_storable(status: int, code: str | None) -> bool:
    """Was this answer produced after execution began? (contract §8)"""
    return 200 <= status < 300 or status >= 500 or code == "capacity_unavailable"


@dataclass(frozen=True)
class StoredResponse:
    """What a replay sends back."""

    status: int
    body: bytes
    content_type: str
    headers: dict[str, str]


@dataclass
class _Entry:
    fingerprint: tuple[str, str, str]
    created: datetime
    response: StoredResponse | None = None  # None while the first request is in flight


@dataclass
class IdempotencyStore:
    """Keys by (api key, Idempotency-Key); see the module docstring for the rules."""

    _entries: dict[tuple[str, str], _Entry] = field(default_factory=dict)

    def begin(
        self, *, api_key: str, key: str, method: str, path: str, body: Any, now: datetime
    ) -> StoredResponse | None:
        """Reserve the key for this request, or return the stored answer to replay.

        Raises IdempotencyKeyInUse / IdempotencyKeyReused as the contract says.
        """
        self._expire(now)
        fingerprint = (method, path, canonical_body(body))
        entry = self._entries.get((api_key, key))
        if entry is None:
            self._entries[(api_key, key)] = _Entry(fingerprint=fingerprint, created=now)
            return None
        if entry.fingerprint != fingerprint:
            first_method, first_path, _ = entry.fingerprint
            if (first_method, first_path) == (method, path):
                what = "a different body"
            else:
                what = f"{first_method} {first_path}"
            raise IdempotencyKeyReused(
                f"This Idempotency-Key was already used with {what}; use a new key for a new "
                "request."
            )
        if entry.response is None:
            raise IdempotencyKeyInUse(
                "A request with this Idempotency-Key is still being processed; retry shortly."
            )
        return entry.response

    def finish(
        self, *, api_key: str, key: str, response: StoredResponse, code: str | None
    ) -> None:
        """Store the answer if execution began; otherwise release the key."""
        entry = self._entries.get((api_key, key))
        if entry is None or entry.response is not None:
            return
        if is_storable(response.status, code):
            entry.response = response
        else:
            del self._entries[(api_key, key)]

    def abandon(self, *, api_key: str, key: str) -> None:
        """Release a key whose request never produced an answer (e.g. a dropped connection)."""
        entry = self._entries.get((api_key, key))
        if entry is not None and entry.response is None:
            del self._entries[(api_key, key)]

    def clear(self) -> None:
        self._entries.clear()

    def _expire(self, now: datetime) -> None:
        stale = [k for k, e in self._entries.items() if now - e.created >= TTL]
        for k in stale:
            del self._entries[k]
