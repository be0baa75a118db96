"""Maybe posted: a chat.postMessage whose answer never came readable is found, not sent again.

chat.postMessage has no idempotency key. When Slack's answer to one is cut, HTML, empty or
never comes (`NoAnswer`, bot/slack/answers.py), Slack may have posted it. Every post the outbox
makes for a key carries that key in its metadata, so the outbox converges instead of guessing:

- right after the unknown answer, `settled` looks for the key in the channel's recent history
  (the thread's replies for a reply): found → it was posted, and that message is the one (its
  coordinates stored, the key delivered); not there → it was not, and the post is tried again;
- when Slack can't be asked either, the key is remembered as maybe posted (storage/outbox.py,
  `MAYBE`), and the next attempt at it (`before_post`, from any replica) looks first.

So a post is never made twice, and nobody is told "nothing changed" when Slack took it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.clock import Clock, host_time
from bot.domain.models import MessageRef
from bot.slack.answers import NoAnswer, error_code, find_posted, slack_said
from storage.db import Database

log = logging.getLogger(__name__)

# Slack's message ts are Slack's clock: look back this far before the post was sent.
CLOCK_SLACK_SECONDS = 120.0


class MaybePosted:
    def __init__(self, *, client: AsyncWebClient, db: Database, clock: Clock) -> None:
        self._client = client
        self._db = db
        self._clock = clock

    def started(self) -> float:
        """A post is about to be sent: the `oldest` (Unix seconds, the host's clock, as
        Slack's own) to search Slack's history from for it."""
        return host_time(self._clock).timestamp() - CLOCK_SLACK_SECONDS

    async def settled(self, key: str, exc: BaseException, oldest: float) -> MessageRef | None:
        """After `exc` from posting `key`: the message when Slack did post it; None when it
        didn't (or `exc` is not an unknown outcome) — the caller treats `exc` as a failure.
        When Slack can't be asked now, `key` is remembered as maybe posted."""
        if not isinstance(exc, NoAnswer) or not exc.maybe_posted or exc.channel is None:
            return None
        where: dict[str, Any] = {"channel": exc.channel, "thread_ts": exc.thread_ts,
                                 "oldest": oldest}
        try:
            ts = await find_posted(self._client, key, channel=exc.channel,
                                   thread_ts=exc.thread_ts, oldest=oldest)
        except Exception as lookup:
            if slack_said(lookup):  # refused (a scope not granted yet): it can't be known
                log.warning("Slack's answer to a post (%s) never came readable, and Slack "
                            "refused to look for it (%s): it will be posted again", key,
                            error_code(lookup))
                return None
            # Slack still not answering: look again before the next attempt
            async with self._db.transaction() as repos:
                await repos.outbox.remember_maybe(key, payload=where, now=self._clock.now())
            log.warning("Slack's answer to a post (%s) never came readable (%s), and looking "
                        "for it failed (%s): it is looked for before any retry", key,
                        exc.cause, type(lookup).__name__)
            return None
        log.warning("Slack's answer to a post (%s) never came readable (%s): it was %s", key,
                    exc.cause, "posted; kept" if ts else "not posted; it will be retried")
        return None if ts is None else MessageRef(channel_id=exc.channel, ts=ts)

    async def before_post(self, key: str, where: Mapping[str, Any] | None) -> MessageRef | None:
        """Before posting `key`: the message already there, if an earlier attempt maybe posted
        it `where` (as remembered: the caller read it while claiming `key`); None: post it.
        Raises when Slack can't be asked (nothing is posted then)."""
        if where is None:
            return None
        channel, thread = str(where["channel"]), where.get("thread_ts")
        try:
            ts = await find_posted(self._client, key, channel=channel,
                                   thread_ts=str(thread) if thread else None,
                                   oldest=float(where["oldest"]))
        except Exception as lookup:
            if not slack_said(lookup):
                raise  # no answer again: nothing is posted, the next attempt looks again
            ts = None  # refused (a scope not granted yet): it can't be known; post it
        async with self._db.transaction() as repos:
            await repos.outbox.forget_maybe(key)
        log.info("a maybe-posted %s was %s", key, "found" if ts else "not posted: posting it")
        return None if ts is None else MessageRef(channel_id=channel, ts=ts)
