"""Which telling goes first when Slack can't take everything at once: the lanes.

A storm (a region outage degrading hundreds of clusters) queues more posts than Slack's
~1 post/s/channel lets out. Who waits is decided here, by what a message is for:

- ANSWER: the answer to a person's own action, and approval cards — a person is waiting;
- MONEY: what a money action says (terminations, the spend envelope, payment);
- HEALTH: degraded / recovered notices and the cluster messages that show them;
- REMINDER: hourly reminders and the like — late is harmless;
- THREAD: a storm's per-cluster thread lines — its digest already told the channel.

The lane rides the task (a context variable): code that tells something sets it once around
the telling (`with lane(Lane.MONEY): ...`) and every Slack call made inside — and in tasks
started inside — is paced in it (bot/slack/pacing.py), and each SQLite transaction takes its
turn in it (storage/turns.py); the sweeps run in MONEY (bot/services/container.py). Unset, a
call is an ANSWER: a handler answering a person never has to say so.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar


class Lane(enum.IntEnum):
    ANSWER = 0
    MONEY = 1
    HEALTH = 2
    REMINDER = 3
    THREAD = 4


_CURRENT: ContextVar[Lane] = ContextVar("slack_lane", default=Lane.ANSWER)


def current() -> Lane:
    return _CURRENT.get()


@contextmanager
def lane(which: Lane) -> Iterator[None]:
    token = _CURRENT.set(which)
    try:
        yield
    finally:
        _CURRENT.reset(token)
