"""A button's row in the action table (bot/slack/actions.py): what its value carries, which
service it calls, what the presser is told, and its once-only claim."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from bot.domain.models import Actor
from bot.services.container import Services
from bot.slack import uploads
from bot.slack.blocks.message import Message
from bot.slack.ids import Ref

R = TypeVar("R", bound=Ref)
T = TypeVar("T")


@dataclass(frozen=True)
class Once(Generic[R, T]):
    """Claim the press before acting: `action` (the audit's name), the subject and version the
    button carries, and what every later press of it hears (`told(ref, result, <@presser>)`)."""

    action: str
    key: Callable[[R], tuple[str, str]]
    told: Callable[[R, T, str], str]


@dataclass(frozen=True)
class Button(Generic[R, T]):
    """One row: the reference the button carries → the service call → the presser's answer
    (`said`: words, or a whole message such as a fresh quote card; or the row's `card`)."""

    ref: type[R]
    act: Callable[[Services, R, Actor], Awaitable[T]]
    said: Callable[[R, T], str | Message]
    once: Once[R, T] | None = None
    card: Callable[[Services, T], Message] | None = None
    picture: Callable[[T], uploads.Picture] | None = None  # uploaded after the act
    # Asked before the claim: a refusal here answers every press, first or repeated, with
    # what is true now (e.g. recovery exhausted) instead of a claim's remembered answer.
    check: Callable[[Services, R, Actor], Awaitable[None]] | None = None
