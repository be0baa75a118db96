"""Workload environment values sealed at rest.

Values typed in the launch form's *Environment* box (tokens, passwords) are needed for one thing:
the launch call to AI Reserve. The `SealedJSON` column type (requests.workload and
launch_intents.body) encrypts every value of the document's `env` mapping on the way in
(Fernet: AES-128-CBC + HMAC-SHA256) and leaves it sealed on the way out, so the database file, a
row read for a card, a log line or an export only ever holds `sealed:v1:<token>`. `unseal` is
called at exactly one place: building the provider call (bot/services/launching.py).

The key is `WORKLOAD_KEY` (a Fernet key; may come from a file). Without one, this process makes
an ephemeral key at start, kept in memory only: values stay unreadable at rest, and a launch
still waiting when the process restarts can't read them back — it fails with a line saying so
(`UnreadableSecret`) instead of launching without them. The keys of `env` stay readable (the
approval card lists them).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from sqlalchemy.engine import Dialect

PREFIX = "sealed:v1:"


class UnreadableSecret(Exception):
    """A sealed value this process's key can't open (WORKLOAD_KEY changed, or none was set and
    the process restarted)."""


class _Keys:
    def __init__(self) -> None:
        self.ephemeral = Fernet(Fernet.generate_key())
        self.configured: Fernet | None = None

    @property
    def sealer(self) -> MultiFernet:
        # Seal with the configured key; open with it or with this process's ephemeral key.
        return MultiFernet([k for k in (self.configured, self.ephemeral) if k is not None])


_KEYS = _Keys()


def configure(key: str | None) -> None:
    """Use `key` (a urlsafe-base64 32-byte Fernet key) from now on; None: the ephemeral key.
    A malformed key raises ValueError (settings validation checks it first)."""
    _KEYS.configured = Fernet(key.encode()) if key else None


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


class SealedJSON(sa.types.TypeDecorator[Any]):
    """A JSON document whose `env` values are sealed before they reach the database."""

    impl = sa.JSON
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        return _sealed_doc(value)
