"""Posting once across replicas: every post is claimed in the database before Slack is called.

`once(key, send)` claims `key` in the outbox (one compare-and-set, see `storage.outbox`), calls
`send`, and marks the key delivered. Of any number of replicas doing the same work, one posts;
the others see DONE (posted already) or BUSY (another replica holds a live claim). A replica that
dies holding a claim loses it when the claim expires, and the post goes out from another one.
chat.postMessage has no idempotency key, so the one window left is between Slack accepting a post
and the row being marked delivered (a crash exactly there posts again after the expiry).

A *durable* post stores its message with the claim: if Slack refuses it, the claim is released
and `retry()` (every delivery pass) posts it later from whichever replica gets there. Posts
rebuilt at delivery time store nothing: SSH details are read from the provider when they are
sent, never written to the database.

DM channels come from the `dm_channels` table: conversations.open once per person. Opening one
is claimed like a post (key `dm-channel/<user>`), so a flood of first DMs to someone, from any
number of replicas, opens it once; the others wait briefly for the id to appear in the table
(and open it themselves if it doesn't: conversations.open is idempotent, only rate-limited).

Messages the bot edits in place (approval cards, progress messages) are `upsert`ed: chat.update
when their coordinates are stored; otherwise their first post is claimed like any other, and a
replica that loses the race waits for the coordinates and edits instead.

Some refusals are for good: a person deactivated, a channel archived or the bot removed from it
(`GONE`). Retrying those only spends Slack calls, so the target is recorded undeliverable once
(storage/outbox.py, with when and why), `on_undeliverable` is told (the notifier tells the
admins and falls back), and every later post to it is skipped without calling Slack until
the notifier's sweep finds it works again and clears the record.

A post whose answer never came readable (cut, HTML, empty, a timeout: `NoAnswer`) may have been
made: each post carries its key in its metadata, and it is looked for before it is made again
(bot/slack/maybe.py) — found, it is the one; the outbox never posts it twice.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.clock import Clock
from bot.domain import lanes
from bot.domain.models import MessageRef
from bot.slack.answers import posting
from bot.slack.blocks.message import Message
from bot.slack.maybe import MaybePosted
from bot.slack.refusals import DM_INSTEAD, POST_ERRORS, Outcome, Unreachable, gone, reason
from storage.db import Database
from storage.outbox import OutboxItem
from storage.replica import wall_clock
from storage.repositories import Repos

log = logging.getLogger(__name__)

DEFAULT_CLAIM = timedelta(minutes=2)
# How a DM waits for another task or replica that is opening the same DM channel (real time:
# it waits on that one's call to Slack): 0.05 s doubling, about 3 s in all, then opens it too.
DM_CHANNEL_WAITS = tuple(0.05 * 2 ** n for n in range(6))
# How long a replica waits for another that is posting the same card (then it edits it).
_WAIT_STEPS, _WAIT_SECONDS = 100, 0.05


@dataclass(frozen=True)
class Seen:
    """What an upsert reads before it edits or posts: whether its channel is recorded
    undeliverable (`code`) and where its message is (`ref`). A caller that reads the stored
    state anyway reads these with it (`SlackOutbox.seen`) and saves the upsert a transaction;
    taken only while no target's reachability changed since (`epoch`): a card refused in a
    channel is what the progress message in the same channel must see next."""

    code: str | None
    ref: MessageRef | None
    epoch: int


class SlackOutbox:
    def __init__(self, *, client: AsyncWebClient, db: Database, clock: Clock, holder: str,
                 claim_ttl: timedelta = DEFAULT_CLAIM,
                 claim_clock: Callable[[], datetime] = wall_clock) -> None:
        self._client = client
        self._db = db
        self._clock = clock  # when things happened (delivered_at)
        self.claim_clock = claim_clock  # how long claims last: real time, shared by processes
        self.holder = holder
        self.claim_ttl = claim_ttl
        self.maybe = MaybePosted(client=client, db=db, clock=clock)  # unknown answers: found
        # Called once per target when it is first found undeliverable (target, Slack's code).
        self.on_undeliverable: Callable[[str, str], Awaitable[None]] | None = None
        # Renders a queued refresh again and posts or edits it (the notifier; raises on a
        # Slack refusal, so the entry stays queued): (what, id, payload).
        self.on_refresh: Callable[[str, str, Mapping[str, Any]], Awaitable[None]] | None = None
        # Stored entries sent at once by a delivery pass: with Slack's limits paced per
        # channel (bot/slack/pacing.py) many go out side by side, each waiting its turn.
        self.concurrency = 1
        # Bumped whenever a target is given up on or works again: a `Seen` read before is stale.
        self.reach_epoch = 0
        # DM channels known here (user → channel): stored once, never changed, so not read again.
        self._dm_channels: dict[str, str] = {}

    async def unreachable(self) -> Mapping[str, str]:
        """Targets recorded undeliverable → Slack's code."""
        async with self._db.transaction() as repos:
            items = await repos.outbox.undeliverable()
        return {i.target: str((i.payload or {}).get("reason")) for i in items}

    async def give_up_on(self, target: str, code: str) -> None:
        """Record `target` undeliverable; the first to record it tells `on_undeliverable`."""
        self.reach_epoch += 1
        async with self._db.transaction() as repos:
            first = await repos.outbox.mark_undeliverable(target, reason=code,
                                                          now=self._clock.now())
        if first:
            log.warning("Slack refuses posts to %s for good (%s): not retried until it works",
                        target, code)
            if self.on_undeliverable is not None:
                await self.on_undeliverable(target, code)

    async def once(self, key: str, *, kind: str, target: str,
                   send: Callable[[], Awaitable[object]],
                   payload: dict[str, Any] | None = None) -> Outcome:
        """Claim `key`, `send`, mark delivered. A failing `send` releases the claim and raises,
        unless Slack said the target is gone: then UNDELIVERABLE (and Slack isn't called for
        it again until it works). A durable post (`payload`) to such a target is kept: stored
        unclaimed, `retry()` sends it once the target works again."""
        async with self._db.transaction() as repos:  # one: most calls find it done (a read)
            item = await repos.outbox.get(key)
            if item is not None and item.delivered_at is not None:
                return Outcome.DONE
            if await repos.outbox.unreachable_reason(target) is not None:
                if payload is not None and item is None:
                    await repos.outbox.hold(key, kind=kind, target=target, payload=payload,
                                            now=self.claim_clock())
                return Outcome.UNDELIVERABLE
            claimed = await repos.outbox.claim(key, kind=kind, target=target, holder=self.holder,
                                               now=self.claim_clock(), ttl=self.claim_ttl,
                                               payload=payload)
            if not claimed:
                item = await repos.outbox.get(key)
                return Outcome.DONE if item and item.delivered_at else Outcome.BUSY
            maybe = await repos.outbox.maybe(key)  # read with the claim (see _send)
        try:
            await self._send(key, send, maybe)
        except Exception as exc:
            async with self._db.transaction() as repos:
                await repos.outbox.release(key, holder=self.holder)
            code = gone(exc)
            if code is None:
                raise
            await self.give_up_on(target, code)
            return Outcome.UNDELIVERABLE
        async with self._db.transaction() as repos:
            await repos.outbox.delivered(key, now=self._clock.now())
        return Outcome.POSTED

    async def _send(self, key: str, send: Callable[[], Awaitable[object]],
                    maybe: Mapping[str, Any] | None) -> object:
        """`send` with `key` in its post's metadata — unless an earlier attempt maybe posted it
        and Slack has it (bot/slack/maybe.py): then that message, not a second one. `maybe` is
        read with the claim of `key` (only its holder writes it): no transaction of its own."""
        oldest = self.maybe.started()
        found = await self.maybe.before_post(key, maybe)
        if found is not None:
            return found
        try:
            with posting(key):
                return await send()
        except Exception as exc:
            found = await self.maybe.settled(key, exc, oldest)
            if found is None:
                raise
            return found

    async def dm_once(self, key: str, user_id: str, message: Message) -> Outcome:
        """A durable DM: a refusal is logged and retried by a later `retry()`."""
        return await self._durable(key, {"user": user_id, "message": message.as_kwargs()})

    async def post_once(self, key: str, channel: str, message: Message, *,
                        thread_ts: str | None = None) -> Outcome:
        """A durable channel post (a thread reply with `thread_ts`)."""
        return await self._durable(key, {"channel": channel, "thread_ts": thread_ts,
                                         "message": message.as_kwargs()})

    async def retry(self) -> int:
        """Deliver what is stored and not delivered — posts Slack refused or whose replica
        died, queued refreshes — by lane, then oldest first. Returns how many went out."""
        async with self._db.transaction() as repos:
            items = await repos.outbox.retryable(now=self.claim_clock(), limit=500)
        items.sort(key=lambda i: (int((i.payload or {}).get("lane", 0)), i.created_at, i.key))
        gate, done = asyncio.Semaphore(self.concurrency), 0

        async def one(item: OutboxItem) -> None:
            nonlocal done
            payload = item.payload or {}
            async with gate:
                with lanes.lane(lanes.Lane(int(payload.get("lane", 0)))):
                    if payload.get("refresh"):
                        done += await self._refresh(item)
                    else:
                        done += await self._durable(item.key, payload) is Outcome.POSTED

        await asyncio.gather(*(one(i) for i in items))
        return done

    async def queue_refresh(self, what: str, subject: str, **extra: Any) -> None:
        """Render `subject` again and post or edit it on a later delivery pass (durable: it
        goes out whatever Slack answers now, in the current lane)."""
        async with self._db.transaction() as repos:
            await repos.outbox.queue_refresh(what, subject, lane=int(lanes.current()),
                                             now=self.claim_clock(), **extra)

    async def _refresh(self, item: OutboxItem) -> bool:
        assert item.payload is not None and self.on_refresh is not None
        async with self._db.transaction() as repos:
            if not await repos.outbox.claim(item.key, kind=item.kind, target=item.target,
                                            holder=self.holder, now=self.claim_clock(),
                                            ttl=self.claim_ttl):
                return False
            # Queued again since the pass read it? What is rendered now includes that too.
            item = await repos.outbox.get(item.key) or item
        assert item.payload is not None
        try:
            await self.on_refresh(str(item.payload["refresh"]), str(item.payload["id"]),
                                  item.payload)
        except BaseException as exc:
            async with self._db.transaction() as repos:
                await repos.outbox.release(item.key, holder=self.holder)
            if not isinstance(exc, POST_ERRORS):
                raise
            log.log(logging.DEBUG if isinstance(exc, Unreachable) else logging.WARNING,
                    "could not refresh the %s message of %s (%s); it will be retried",
                    item.payload["refresh"], item.payload["id"], reason(exc))
            return False
        async with self._db.transaction() as repos:
            await repos.outbox.delivered(item.key, now=self._clock.now(),
                                         queued_at=item.created_at)
        return True

    async def dm(self, user_id: str, kwargs: dict[str, Any]) -> None:
        """Post to a person's DM channel (opened once, read from the database once a process)."""
        channel = await self.dm_channel(user_id)
        await self._client.chat_postMessage(channel=channel, **kwargs)

    async def dm_channel(self, user_id: str) -> str:
        """The person's DM channel id: known here, else from the database, else opened once
        (claimed)."""
        if known := self._dm_channels.get(user_id):
            return known
        key = f"dm-channel/{user_id}"
        for wait in (*DM_CHANNEL_WAITS, None):
            async with self._db.transaction() as repos:
                channel = await repos.dm_channels.get(user_id)
                claimed = channel is None and await repos.outbox.claim(
                    key, kind="dm_channel", target=user_id, holder=self.holder,
                    now=self.claim_clock(), ttl=self.claim_ttl)
            if channel is not None:
                self._dm_channels[user_id] = channel
                return channel
            if claimed or wait is None:
                break
            await asyncio.sleep(wait)  # another one is opening it right now
        try:
            opened = await self._client.conversations_open(users=user_id)
        except Exception:
            if claimed:
                async with self._db.transaction() as repos:
                    await repos.outbox.release(key, holder=self.holder)
            raise
        channel = str(opened["channel"]["id"])
        async with self._db.transaction() as repos:
            await repos.dm_channels.put(user_id, channel)
            if claimed:
                await repos.outbox.delivered(key, now=self._clock.now())
        self._dm_channels[user_id] = channel
        return channel

    async def _durable(self, key: str, payload: dict[str, Any]) -> Outcome:
        user, channel = payload.get("user"), payload.get("channel")
        kwargs: dict[str, Any] = dict(payload["message"])

        async def send() -> None:
            if user is not None:
                await self.dm(str(user), kwargs)
            else:
                thread = {"thread_ts": payload["thread_ts"]} if payload.get("thread_ts") else {}
                await self._client.chat_postMessage(channel=str(channel), **thread, **kwargs)

        try:
            return await self.once(key, kind="dm" if user else "post",
                                   target=str(user or channel), send=send,
                                   payload={"lane": int(lanes.current()), **payload})
        except POST_ERRORS as exc:  # stored: a later delivery pass tries again, until it works
            log.warning("could not post %s (%s); it will be retried", key.split("/")[0],
                        reason(exc))
            return Outcome.BUSY

    # --- messages edited in place (approval cards, progress messages) ---------------------

    async def upsert(self, kind: str, subject: str, channel: str, message: Message, *,
                     create: bool = True, fallback_user: str | None = None,
                     seen: Seen | None = None) -> MessageRef | None:
        """Edit the stored message; post it first if there is none. The first post is claimed
        (key `message/<kind>/<subject>`): a replica that finds another posting it waits for
        the coordinates and edits instead, so no replica posts a second card. Returns the
        message's stored coordinates, as edited or posted (None: nothing shown). `seen`: what
        the caller read of it (`seen`), else read here."""
        if seen is None or seen.epoch != self.reach_epoch:
            async with self._db.transaction() as repos:
                seen = await self.seen(repos, kind, subject, channel)
        code, ref = seen.code, seen.ref
        # Its message is in a channel Slack refuses (a DM fallback can't edit it): not called.
        if code is not None and (fallback_user is None or (ref and ref.channel_id == channel)):
            if not create:
                return None  # nothing to retire where nothing can be seen
            raise Unreachable(channel, code)
        key, stale = f"message/{kind}/{subject}", None
        if ref is not None:
            try:
                if await self._edit(ref, message, kind=kind, subject=subject):
                    return ref
            except SlackApiError as exc:
                code = gone(exc)
                if code is None:
                    raise
                await self.give_up_on(ref.channel_id, code)
                if not create:
                    return None
                raise Unreachable(ref.channel_id, code) from exc
            key, stale = f"{key}/{ref.ts}", ref.ts  # deleted in Slack: a key of its own
        if not create:
            return None
        for _ in range(_WAIT_STEPS):
            now = self.claim_clock()
            async with self._db.transaction() as repos:
                if await repos.outbox.claim(key, kind="message", target=channel,
                                            holder=self.holder, now=now,
                                            ttl=self.claim_ttl):
                    maybe = await repos.outbox.maybe(key)  # read with the claim (see _send)
                    break
                ref = await repos.messages.get(kind, subject)
            if ref is not None and ref.ts != stale:
                await self._edit(ref, message, kind=kind, subject=subject)
                return ref
            await asyncio.sleep(_WAIT_SECONDS)  # another replica is posting it right now
        else:
            log.warning("%s message for %s is still being posted elsewhere", kind, subject)
            return None
        try:
            sent: Any = await self._send(key, partial(self._post, channel, message,
                                                 fallback_user=fallback_user), maybe)
        except Exception as exc:
            async with self._db.transaction() as repos:
                await repos.outbox.release(key, holder=self.holder)
            code = gone(exc)
            if code is None or fallback_user is not None:
                raise
            await self.give_up_on(channel, code)
            raise Unreachable(channel, code) from exc
        posted = sent if isinstance(sent, MessageRef) else MessageRef(  # found, or Slack's answer
            channel_id=sent["channel"], ts=sent["ts"])
        async with self._db.transaction() as repos:  # coordinates and delivery: one commit
            await repos.messages.put(kind, subject, posted, now=self._clock.now())
            await repos.outbox.delivered(key, now=self._clock.now())
        return posted

    async def seen(self, repos: Repos, kind: str, subject: str, channel: str) -> Seen:
        """What `upsert(kind, subject, channel, …)` reads first, read in `repos`' transaction."""
        return Seen(code=await repos.outbox.unreachable_reason(channel),
                    ref=await repos.messages.get(kind, subject), epoch=self.reach_epoch)

    async def _edit(self, ref: MessageRef, message: Message, *, kind: str,
                    subject: str) -> bool:
        """chat.update (idempotent); False if the message was deleted in Slack."""
        try:
            await self._client.chat_update(channel=ref.channel_id, ts=ref.ts,
                                           **message.as_kwargs())
            return True
        except SlackApiError as exc:
            if exc.response.get("error") != "message_not_found":
                raise
            log.warning("%s message for %s was deleted; posting it again", kind, subject)
            return False

    async def _post(self, channel: str, message: Message, *,
                    fallback_user: str | None) -> Any:
        try:
            return await self._client.chat_postMessage(channel=channel, **message.as_kwargs())
        except SlackApiError as exc:
            if fallback_user is None or exc.response.get("error") not in DM_INSTEAD:
                raise
            log.warning("can't post to %s (%s); using a DM", channel, exc.response.get("error"))
            channel = await self.dm_channel(fallback_user)  # opened once per person
            return await self._client.chat_postMessage(channel=channel, **message.as_kwargs())
