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
"""

from __future__ import annotations


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
