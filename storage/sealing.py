"""Workload environment values sealed at rest.

Values typed in the launch form's *Environment* box (tokens, passwords) are needed for one thing:
the launch call to AI Reserve. The `SealedJSON` column type (requests.workload and
launch_intents.body) encrypts every value of the document's `env` mapping on the way in
(Fernet: AES-128-CBC + HMAC-SHA256), so the database file, a backup or a dump only ever holds
`sealed:v1:<token>`; rows read back are opened again in memory (the values never reach a card, a
log line, the audit trail or an export: tests/e2e/test_secrets.py, test_workload_secrets.py).
A value this process can't open stays sealed, and the launch call (bot/services/launching.py,
`unseal_env`) then fails it for good with a line saying why, instead of launching without it.

The key is `WORKLOAD_KEY` (a Fernet key; may come from a file). Without one it is derived from
the Slack signing secret (or, in Socket Mode, the app token) — a secret every replica already
shares and no row holds — so values survive restarts and move between replicas; regenerating
that secret then makes launches still waiting unreadable. With neither (the local workspace's
fake Slack), this process makes an ephemeral key kept in memory only. Either way a value that
can't be opened fails its launch with a line saying so (`UnreadableSecret`) instead of
launching without it. The keys of `env` stay readable (the approval card lists them).
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from sqlalchemy.engine import Dialect

PREFIX = "sealed:v1:"


class UnreadableSecret(Exception):
    """A sealed value this process's key can't open (WORKLOAD_KEY changed, or none was set and
    the process restarted)."""


class _Keys:
    def __init__(self) -> None:
        self.ephemeral = Fernet(Fernet.generate_key())
        self.configured: Fernet | None = None
        self.previous: list[Fernet] = []

    @property
    def sealer(self) -> MultiFernet:
        # Seal with the configured key; open with it or with this process's ephemeral key.
        # MultiFernet seals with the first and opens with any.
        keys = [self.configured] if self.configured is not None else []
        return MultiFernet([*keys, *self.previous, self.ephemeral])


_KEYS = _Keys()


def configure(key: str | None, *, previous: Sequence[str] = ()) -> None:
    """Use `key` (a urlsafe-base64 32-byte Fernet key) from now on; None: the ephemeral key.
    `previous` keys still open what they sealed (a rotation), never seal. A malformed key
    raises ValueError (settings validation checks it first)."""
    _KEYS.configured = Fernet(key.encode()) if key else None
    _KEYS.previous = [Fernet(k.encode()) for k in previous]


def derived_key(secret: str) -> str:
    """A Fernet key derived (HKDF-SHA256) from another secret setting the bot already has —
    the same on every replica and across restarts, never stored anywhere."""
    raw = HKDF(algorithm=hashes.SHA256(), length=32, salt=None,
               info=b"cluster-bot workload env v1").derive(secret.encode())
    return base64.urlsafe_b64encode(raw).decode()


def check_key(key: str) -> None:
    """ValueError unless `key` is a usable Fernet key."""
    Fernet(key.encode())


def is_sealed(value: str) -> bool:
    return value.startswith(PREFIX)


def seal(value: str) -> str:
    if is_sealed(value):
        return value
    return PREFIX + _KEYS.sealer.encrypt(value.encode()).decode()


def unseal(value: str) -> str:
    if not is_sealed(value):
        return value
    try:
        return _KEYS.sealer.decrypt(value[len(PREFIX):].encode()).decode()
    except InvalidToken:
        raise UnreadableSecret(
            "an environment value of this launch was sealed with another WORKLOAD_KEY (or "
            "with the ephemeral key of a process that has since restarted) and can't be read"
        ) from None


def seal_env(env: dict[str, str]) -> dict[str, str]:
    return {key: seal(value) for key, value in env.items()}


def unseal_env(env: dict[str, str]) -> dict[str, str]:
    return {key: unseal(value) for key, value in env.items()}


def _sealed_doc(value: Any) -> Any:
    if isinstance(value, dict) and isinstance(value.get("env"), dict):
        env = value["env"]
        return {**value, "env": {k: seal(v) if isinstance(v, str) else v
                                 for k, v in env.items()}}
    return value


def _opened_doc(value: Any) -> Any:
    """Values this process can open come back open (rows round-trip); one it can't stays
    sealed, so reading the row still works and only the launch (`unseal`) says why it can't."""
    if isinstance(value, dict) and isinstance(value.get("env"), dict):
        return {**value, "env": {k: _open_or_keep(v) for k, v in value["env"].items()}}
    return value


def _open_or_keep(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return unseal(value)
    except UnreadableSecret:
        return value


class SealedJSON(sa.types.TypeDecorator[Any]):
    """A JSON document whose `env` values are sealed before they reach the database."""

    impl = sa.JSON
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        return _sealed_doc(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> Any:
        return _opened_doc(value)


class SealedText(sa.types.TypeDecorator[str]):
    """A secret string (a Slack installation's bot and refresh tokens) sealed before it reaches
    the database, opened again on the way out. One this process can't open comes back sealed
    (`is_sealed`): the installation is then unusable until it is installed again, and says so."""

    impl = sa.Text
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        return None if value is None else seal(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> str | None:
        return None if value is None else _open_or_keep(value)
