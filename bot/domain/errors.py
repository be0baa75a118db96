"""The domain error tree: what a person is told when the bot says no.

Every error carries a `user_message` written for Slack (mrkdwn, no internals) and, where the
person typed something wrong, the `usage` that shows the right form. The Slack middleware maps
any `DomainError` to one ephemeral reply; nothing else in the transport catches them.

    DomainError
    ├── InvalidCommand (ValueError)   bad_part, usage
    ├── NotAllowed (PermissionError)   the actor may not do this
    ├── UnknownResource (LookupError)  kind, ident
    ├── Conflict                       the thing is not in a state that allows this
    └── ProviderUnavailable            AI Reserve failed or timed out; retry later

    StorageUnavailable                 the database can't take a write (full, down, read-only)

`StorageUnavailable` is not a `DomainError`: it refuses nothing and must not be recorded as a
refusal (the audit decorator records refusals) — it is an outage around the bot, raised by
storage/db.py's transaction wrapper only, and the Slack middleware tells the person what it is.
"""

from __future__ import annotations

import enum


class DomainError(Exception):
    """A refusal with a message fit for the person who asked."""

    def __init__(self, user_message: str) -> None:
        super().__init__(user_message)
        self.user_message = user_message


class InvalidCommand(DomainError, ValueError):
    """Input that can't be understood; `bad_part` names it and `usage` shows the right form."""

    def __init__(self, user_message: str, *, bad_part: str | None = None, usage: str = "") -> None:
        super().__init__(user_message)
        self.bad_part = bad_part
        self.usage = usage


class NotAllowed(DomainError, PermissionError):
    """The actor is not allowed to do this (not an approver, their own request, not the owner)."""


class UnknownResource(DomainError, LookupError):
    def __init__(self, kind: str, ident: str) -> None:
        super().__init__(f"I don't know a {kind} `{ident}`.")
        self.kind = kind
        self.ident = ident


class Conflict(DomainError):
    """The request or cluster is not in a state that allows this (already decided, stale card…)."""


class ProviderUnavailable(DomainError):
    """AI Reserve did not answer usefully; nothing was changed on our side."""


class StorageTrouble(enum.Enum):
    FULL = "full"  # disk (or the database's size limit) full
    UNAVAILABLE = "unavailable"  # server down, restarting or unreachable; storage failing
    READ_ONLY = "read-only"  # the file, the mount or the server takes no writes

_STORAGE_WORDS = {
    StorageTrouble.FULL: "The bot's database is full (its disk has no space left), so I couldn't "
                         "save this. Nothing was changed. An admin needs to free space; then try "
                         "again.",
    StorageTrouble.UNAVAILABLE: "The bot's database can't be reached right now (it may be "
                                "restarting), so I couldn't save this. Nothing was changed. "
                                "Try again in a minute.",
    StorageTrouble.READ_ONLY: "The bot's database is read-only right now, so I couldn't save "
                              "this. Nothing was changed. An admin needs to make it writable "
                              "again; then try again.",
}


class StorageUnavailable(Exception):
    """The database can't take this transaction: `trouble` says why; it was rolled back."""

    def __init__(self, trouble: StorageTrouble, detail: str) -> None:
        super().__init__(f"database {trouble.value}: {detail}")
        self.trouble = trouble
        self.detail = detail  # the driver's words, log-safe (no statement, no parameters)

    @property
    def user_message(self) -> str:
        return _STORAGE_WORDS[self.trouble]
