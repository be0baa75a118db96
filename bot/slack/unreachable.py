"""What the bot does when Slack refuses a target for good (bot/slack/refusals.py `GONE`).

Retrying a deactivated person or an archived channel only spends Slack calls, so the outbox
records the target once and skips it from then on. What is left is telling people who can act:

- the admins (policy `admin_ids`) get one DM per broken target, when it is first found;
- an owner who can't be reached about a cluster: the approvals channel is told, once per owner
  and cluster, with the cluster and what it bills (nobody else would hear it keeps billing);
- an approvals channel that can't be reached: the approval card goes to each approver by DM
  (its buttons work anywhere) and the requester is told where their request went;
- what is meant for an archived channel, or one the bot was removed from (outbox `HELD`), is
  held — notices stay pending, stored posts stay stored — not dropped;
- Slack's own events say when a target breaks or works again (bot/slack/signals.py:
  `channel_archive`, `member_left_channel`, `user_change` …): acted on at once (`said_gone`,
  `said_back`), not at the next probe;
- every sweep probes each broken channel once (conversations.info, every `RECHECK_EVERY` of
  the host's clock); when it works again — probed or said — the record is cleared and what
  waited goes out there (each claimed, so once): the approvals channel's pending cards, the
  cards of clusters found at AI Reserve meanwhile, the held notices and posts.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime, timedelta
from functools import partial

from slack_sdk.web.async_client import AsyncWebClient

from bot.clock import Clock, host_time
from bot.domain.models import ClusterRecord, LaunchRequest, RequestStatus
from bot.services.people import People
from bot.slack.blocks import common as common_blocks
from bot.slack.blocks.format import money
from bot.slack.blocks.message import Message
from bot.slack.outbox import SlackOutbox
from bot.slack.refusals import HELD, POST_ERRORS, Outcome, Unreachable, reason
from storage.db import Database
from storage.outbox import FOUND

log = logging.getLogger(__name__)

# How often a broken channel is probed: every sweep, but not on every poll's delivery pass
# (host time: AI Reserve's clock says nothing about Slack, and may stand still or jump).
RECHECK_EVERY = timedelta(seconds=30)

# What Slack's refusal says about the target: (of a channel, "it …"; of a person, "they …").
_WORDS = {
    "is_archived": ("is archived", "are archived"),
    "not_in_channel": ("no longer has the bot in it", "no longer have the bot in it"),
    "channel_not_found": ("can't be found", "can't be found"),
    "user_not_found": ("no longer exists in Slack", "no longer exist in Slack"),
    "user_disabled": ("is deactivated", "are deactivated"),
    "account_inactive": ("is deactivated", "are deactivated"),
    "cannot_dm_bot": ("can't receive DMs from the bot", "can't receive DMs from the bot"),
}


# A deactivated person can be reactivated: users.info says when (`deleted` false again).
COMES_BACK = frozenset({"user_disabled", "account_inactive"})
PostPending = Callable[[str], Awaitable[None]]  # a pending request's card, posted


def is_channel(target: str) -> bool:
    return target[:1] in ("C", "G")


def words(code: str, target: str) -> str:
    """What Slack's refusal `code` says about `target`, agreeing with it: a channel "is
    archived" (it), a person "are deactivated" (they)."""
    channel, person = _WORDS.get(code, (f"refuses posts ({code})", f"refuse posts ({code})"))
    return channel if is_channel(target) else person


def mention(target: str) -> str:
    return f"<#{target}>" if is_channel(target) else f"<@{target}>"


def cluster_named(record: ClusterRecord) -> str:
    """`name` (`id`), or just `id` when the cluster has no name of its own."""
    if record.name and record.name != record.id:
        return f"`{record.name}` (`{record.id}`)"
    return f"`{record.id}`"


class Fallbacks:
    def __init__(self, *, client: AsyncWebClient, db: Database, outbox: SlackOutbox,
                 people: People, clock: Clock) -> None:
        self._client = client
        self._db = db
        self._outbox = outbox
        self._people = people
        self._clock = clock
        self._rechecked_at: datetime | None = None
        outbox.on_undeliverable = self.broken

    async def broken(self, target: str, code: str) -> None:
        """A target just found broken (its first record only): each admin hears once, and if
        it is a person, the approvals channel hears about every cluster of theirs that bills
        (whatever DM found them gone: a reminder, their connection details, a reply)."""
        await self.tell_admins(target, code)
        if is_channel(target):
            return
        async with self._db.transaction() as repos:
            owned = await repos.clusters.list_live(owners=[target])
        for record in owned:
            await self._owner_gone(record, target, code)

    async def tell_admins(self, target: str, code: str) -> None:
        """One DM to each admin about a target just found broken."""
        said = f"{words(code, target)} (`{code}`)"
        text = (f"I can't post to {mention(target)} on Slack: it {said}. "
                f"I stopped trying and use a fallback; I try the channel again each sweep."
                if is_channel(target) else
                f"I can't reach {mention(target)} on Slack: they {said}. "
                f"I stopped trying; what they own is reported in the approvals channel.")
        since = self._clock.now().isoformat()
        for admin in sorted(self._people.policy.admin_ids - {target}):
            await self._send(f"broken/{target}/{since}/{admin}", admin,
                             partial(self._outbox.dm, admin,
                                     common_blocks.notice(text).as_kwargs()))

    async def owner_unreachable(self, record: ClusterRecord,
                                refused: Sequence[tuple[str, Outcome]]) -> None:
        """When a notice's post to the cluster's owner was UNDELIVERABLE (`refused`: the
        targets and outcomes of those posts), the approvals channel hears, once per owner and
        cluster, who can't be told and what the cluster bills."""
        owner = record.owner_id
        if owner is not None and owner in {target for target, _ in refused}:
            code = (await self._outbox.unreachable()).get(owner, "user_disabled")
            await self._owner_gone(record, owner, code)

    async def _owner_gone(self, record: ClusterRecord, owner: str, code: str) -> None:
        channel = self._people.policy_for(record).approvals_channel
        if not channel or not record.status.is_live:
            return
        text = (f"I can't reach {mention(owner)}, the owner of {cluster_named(record)}: "
                f"they {words(code, owner)} (`{code}`). It bills "
                f"{money(record.hourly_cents)}/h, {money(record.accrued_cents)} accrued so far. "
                f"Someone should decide whether it keeps running.")
        await self._send(f"unreachable-owner/{owner}/{record.id}", channel,
                         partial(self._client.chat_postMessage, channel=channel,
                                 **common_blocks.notice(text).as_kwargs()))

    async def card_by_dm(self, request: LaunchRequest, quote_id: str, card: Message,
                         exc: Unreachable) -> None:
        """The approvals channel is unreachable: each approver gets the card of a pending
        request by DM, and the requester is told where it went (once per request and quote)."""
        if request.status is not RequestStatus.PENDING:
            return
        approvers = await self._people.approvers()
        for person in sorted(approvers - {request.requester_id}):
            await self._send(f"card-dm/{request.id}/{quote_id}/{person}", person,
                             partial(self._outbox.dm, person, card.as_kwargs()))
        text = (f"Your launch request `{request.id}` is stored; the approvers were told by DM "
                f"because {mention(exc.target)} {words(exc.code, exc.target)}.")
        await self._outbox.dm_once(f"tell/{request.requester_id}/card-dm/{request.id}/"
                                   f"{quote_id}", request.requester_id,
                                   common_blocks.notice(text))

    async def recheck(self, post_pending: PostPending) -> None:
        """Probe each broken target once: a channel (conversations.info) that works again is
        cleared and, if it is the approvals channel, its pending cards are posted
        (`post_pending(request_id)`); a deactivated person (users.info) who is back is cleared."""
        now = host_time(self._clock)
        if self._rechecked_at is not None and now - self._rechecked_at < RECHECK_EVERY:
            return
        self._rechecked_at = now
        for target, code in (await self._outbox.unreachable()).items():
            channel = is_channel(target)
            if not channel and code not in COMES_BACK:
                continue  # gone for good (user_not_found, a bot): the admins were told
            try:
                info = ((await self._client.conversations_info(channel=target))["channel"]
                        if channel else (await self._client.users_info(user=target))["user"])
            except POST_ERRORS as exc:
                log.info("%s is still unreachable (%s)", target, reason(exc))
                continue
            if info.get("is_archived") or info.get("is_member") is False or info.get("deleted"):
                continue
            log.warning("%s works again (%s %s before): posting what waited", target,
                        "it" if channel else "they", words(code, target))
            await self._works_again(target, post_pending)

    async def held(self) -> set[str]:
        """Targets whose posts are held until a person undoes what Slack refused (`HELD`)."""
        return {t for t, code in (await self._outbox.unreachable()).items() if code in HELD}

    async def said_gone(self, target: str, code: str) -> None:
        """Slack said (an event) that `target` can't take posts (`code`): recorded now, the
        admins told once (and of a person, the approvals channel of what they own)."""
        await self._outbox.give_up_on(target, code)

    async def said_back(self, target: str, codes: frozenset[str],
                        post_pending: PostPending) -> bool:
        """Slack said (an event) that what made `target` refuse posts was undone: if its
        record says one of `codes`, it is cleared and what waited goes out. True if so."""
        code = (await self._outbox.unreachable()).get(target)
        if code not in codes:
            return False
        log.warning("%s works again, Slack says (%s %s before): posting what waited", target,
                    "it" if is_channel(target) else "they", words(str(code), target))
        await self._works_again(target, post_pending)
        return True

    async def _works_again(self, target: str, post_pending: PostPending) -> None:
        """Clear `target`'s record; post the approvals channel's pending cards and queue the
        telling of the clusters found there meanwhile (their cards were skipped); the held
        notices and posts go on the delivery pass."""
        async with self._db.transaction() as repos:
            await repos.outbox.reachable_again(target)
            pending = [r for r in await repos.requests.list_pending()  # its cards' channel
                       if self._people.policy_for(r).approvals_channel == target]
        self._outbox.reach_epoch += 1  # what an upsert read of it before is stale
        if is_channel(target):
            await self._outbox.queue_refresh(FOUND, target)
        for request in pending:
            await post_pending(request.id)

    async def quietly(self, post: Awaitable[object]) -> None:
        """A post that may be skipped where it can't be seen (the admins were told)."""
        try:
            await post
        except Unreachable as exc:
            log.debug("skipped a post to %s (%s)", exc.target, exc.code)

    async def _send(self, key: str, target: str,
                    send: Callable[[], Awaitable[object]]) -> None:
        try:
            await self._outbox.once(key, kind="fallback", target=target, send=send)
        except POST_ERRORS as exc:  # released: nothing retries a fallback, so say so
            log.warning("could not post the fallback %s: %s", key.split("/")[0], reason(exc))
