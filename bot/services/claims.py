"""Buttons act once: a press claims (action, subject, version) in the database before acting.

The version is the state the button was shown (the envelope's hours, the recovery attempt
count, the reminder's hour, "-" for what happens once per subject). Of any number of
deliveries of that press — a double click, a proxy retry, other people's copies of the same
card, the App Home — exactly one acts; every other one is refused with what already happened
and by whom, and the refusal is audited. A refused or failed action releases its claim (the
next press may try again); a claim whose process died mid-action is taken over after `LEASE`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TypeVar

from bot.clock import Clock
from bot.domain.claims import ActionClaim, ClaimKey
from bot.domain.errors import Conflict
from bot.domain.models import Actor
from bot.services.audit import AuditLog
from storage.db import Database

T = TypeVar("T")
LEASE = timedelta(minutes=2)  # far beyond any one action (provider calls time out sooner)


class ButtonClaims:
    def __init__(self, *, db: Database, audit: AuditLog, clock: Clock) -> None:
        self._db = db
        self._audit = audit
        self._clock = clock

    async def once(self, key: ClaimKey, *, actor: Actor, act: Callable[[], Awaitable[T]],
                   told: Callable[[T], str]) -> T:
        """Run `act` if this press is the first of `key`; `told(result)` is what later presses
        hear. Raises `Conflict` (with that answer) for every press after the first."""
        now = self._clock.now()
        async with self._db.transaction() as repos:
            held = await repos.claims.take(key, actor_id=actor.user_id, now=now,
                                           stale_before=now - LEASE)
        if held is not None:
            answer = already(held)
            await self._audit.write(actor=actor, action=key.action, subject_id=key.subject_id,
                                    outcome="refused",
                                    detail=f"a repeated or stale press (version {key.version}): "
                                           f"{answer}")
            raise Conflict(answer)
        try:
            result = await act()
        except BaseException:
            async with self._db.transaction() as repos:
                await repos.claims.release(key)
            raise
        async with self._db.transaction() as repos:
            await repos.claims.finish(key, answer=told(result), now=self._clock.now())
        return result


def already(claim: ActionClaim) -> str:
    if claim.done_at is not None and claim.answer:
        return claim.answer
    return (f"<@{claim.actor_id}> pressed this a moment ago and it is being done now; "
            "nothing more was changed.")
