"""A PostgreSQL DATABASE_URL as libpq reads it: one URL for the bot, `migrate` and `pg_dump`.

Managed PostgreSQL hands out libpq URLs (`postgresql://u:p@host/db?sslmode=verify-full&
sslrootcert=/etc/ssl/ca.pem`). asyncpg reads such a URL itself, but SQLAlchemy would pass each
query parameter to `asyncpg.connect()` as a keyword (`TypeError: … 'sslmode'`). So the engine is
given the URL without its query and connects through asyncpg with the whole URL (`connect()`).

Every parameter is checked first (`check()`): one libpq has that asyncpg doesn't honour (it
would reach the server as a setting and fail there), or a value libpq wouldn't take, is refused
by name — the settings say so in one line and exit 2 — before anything connects. `ssl=…`, the
form this bot took before, still works: it means `sslmode=…` (pg_dump doesn't know it).
Never echo the URL: it may carry the password.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

SSLMODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")
SESSION_ATTRS = ("any", "primary", "standby", "prefer-standby", "read-write", "read-only")
_CHOICES = {"sslmode": SSLMODES, "ssl": SSLMODES, "target_session_attrs": SESSION_ATTRS,
            "gsslib": ("gssapi", "sspi"), "sslnegotiation": ("postgres", "direct"),
            "ssl_min_protocol_version": ("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3"),
            "ssl_max_protocol_version": ("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3")}
_FILES = ("sslrootcert", "sslcert", "sslkey", "sslcrl", "passfile")
# What asyncpg reads from the URL as libpq does (application_name: a server setting, sent as
# libpq sends it; connect_timeout: asyncpg's `timeout`).
HONOURED = frozenset({"host", "port", "dbname", "user", "password", "service", "krbsrvname",
                      "application_name", "connect_timeout", *_CHOICES, *_FILES,
                      "sslpassword"})


def is_postgres(url: str) -> bool:
    return url.strip().split("://", 1)[0].lower().split("+", 1)[0] in ("postgresql", "postgres")


def check(url: str) -> None:
    """ValueError naming the first parameter (and only its name, or a value that is not a
    secret) this bot can't honour; nothing for a URL it can."""
    for name, value in parse_qsl(urlsplit(url.strip()).query, keep_blank_values=True):
        if name not in HONOURED:
            raise ValueError(f"the parameter {name!r} is libpq's, but this bot's driver "
                             f"(asyncpg) can't honour it: remove it (it honours "
                             f"{', '.join(sorted(HONOURED - {'password', 'ssl'}))})")
        choices = _CHOICES.get(name)
        if choices is not None and value not in choices:
            raise ValueError(f"{name}={value!r} is not one of {', '.join(choices)}")
        if name in ("port", "connect_timeout") and not all(
                part.isdigit() for part in value.split(",")):
            raise ValueError(f"{name}={value!r} is not a number")
        if name in _FILES and not os.access(value, os.R_OK):
            raise ValueError(f"{name}={value!r}: no file this process can read there")


def engine_args(url: str) -> tuple[str, dict[str, Any]]:
    """The URL SQLAlchemy's engine is given and the keyword arguments that make it connect
    with the whole libpq URL (`check()` it first)."""
    parts = urlsplit(url.strip())
    query = parse_qsl(parts.query, keep_blank_values=True)
    given = dict(query)
    timeout = given.get("connect_timeout")
    names = {name for name, _ in query}
    kept = [("sslmode" if name == "ssl" else name, value) for name, value in query
            if name != "connect_timeout" and not (name == "ssl" and "sslmode" in names)]
    dsn = f"postgresql://{parts.netloc}{parts.path}" + (f"?{urlencode(kept)}" if kept else "")
    options: dict[str, Any] = {} if timeout in (None, "", "0") else {"timeout": float(timeout)}
    return "postgresql+asyncpg://", {"async_creator": _connector(dsn, options)}


def _connector(dsn: str, options: dict[str, Any]) -> Callable[[], Awaitable[Any]]:
    async def connect() -> Any:
        import asyncpg  # type: ignore[import-untyped]

        return await asyncpg.connect(dsn, **options)

    return connect
