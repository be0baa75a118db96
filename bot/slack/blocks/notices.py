"""What the watcher says about a cluster: thread notices, the hourly reminder DM, the top message
of an adopted cluster, and `/cluster logs`.

Every notice renders facts the watcher already decided on (bot/domain/watch.py); nothing here
decides whether to speak. Money is the provider's own figure or the locked rate, never an
estimate. No SSH details: these messages live in channels (or go to approvers).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from slack_sdk.models.blocks import Block, ButtonElement

from bot.domain import recovery
from bot.domain.models import ClusterRecord, ClusterState
from bot.domain.reasons import error_words, why_terminated
from bot.domain.watch import Notice, NoticeKind
from bot.slack.blocks import recovery as recovery_blocks
from bot.slack.blocks.cluster import (
    ADOPTED,
    TERMINABLE,
    UNCLAIMED_NOTE,
    cluster_ref,
    cluster_state_line,
    owner_mention,
    terminate_button,
)
from bot.slack.blocks.duty import duty_buttons
from bot.slack.blocks.format import *
from bot.slack.blocks.idle import idle_warning
from bot.slack.blocks.message import *
from bot.slack.blocks.readiness import serving_notice
from bot.slack.blocks.unreadable import readable_again_notice
from bot.slack.ids import Action, ClusterRef, ReminderRef

RANKS_SHOWN = 16  # a self-serve cluster has at most 8 nodes; more is a provider oddity
LOG_LINE_MAX = 400  # one very long line must not push every other line out
LOG_SECTION_BUDGET = 2800  # payload characters per code block (Slack: 3000 per section)
LOG_BUDGET = 9000  # all code blocks together: the message stays well under ~13k
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


@dataclass
class _Parts:
    """One notice before it becomes blocks: fallback, body, context lines and buttons."""

    text: str
    body: str
    notes: list[str] = field(default_factory=list)
    buttons: list[ButtonElement] = field(default_factory=list)


def thread_notice(n: Notice, c: ClusterRecord, *, now: datetime) -> Message:
    """A short, factual reply in the cluster's thread (the caller broadcasts `n.kind.broadcast`)."""
    if n.kind is NoticeKind.SERVING:
        return serving_notice(n, c)
    if n.kind is NoticeKind.READABLE_AGAIN:
        return readable_again_notice(n, c)
    if n.kind is NoticeKind.IDLE_WARNING:
        return idle_warning(n, c)
    render = _RENDERERS.get(n.kind)
    if render is None:
        raise ValueError(f"{n.kind.value} is not a thread notice (use reminder_dm)")
    parts = render(n, c)
    blocks: list[Block] = [section(parts.body)]
    notes = list(parts.notes)
    if n.kind.broadcast:
        notes.append(f"Owner: {owner_mention(c.owner_id)}")
    blocks.extend(context(note) for note in notes)
    if parts.buttons:
        blocks.append(actions(*parts.buttons))
    return compose(parts.text, blocks, key=f"notice.{n.kind.value}")


def reminder_dm(n: Notice, c: ClusterRecord, *, now: datetime,
                terminate_at: datetime | None = None) -> Message:
    """The hourly accrual DM: how long it has run, what it has cost, and how it ends — at
    `terminate_at` when its envelope is enforced (the time the envelope DMs state), else it
    bills on until someone terminates it."""
    f = n.facts
    rate = c.hourly_cents
    running = f.running_seconds
    if running is None and c.ready_at is not None:
        running = int((now - c.ready_at).total_seconds())
    ran = f"has run {duration(running)}" if running is not None else "is running"
    since = f" since {when(c.ready_at)}" if c.ready_at else ""
    body = (f":hourglass_flowing_sand: {cluster_ref(c)} {ran}{since} and accrued "
            f"*{money(f.accrued_cents)}* so far (AI Reserve's figure) at *{hourly(rate)}* — "
            f"about {money(rate * 24)} per day. {_ends(terminate_at, now=now)}.")
    blocks: list[Block] = [section(body)]
    if recovery.exhausted(c):
        blocks.append(context(recovery_blocks.exhausted_note(c)))
    elif c.status is ClusterState.DEGRADED:
        blocks.append(context(":large_orange_circle: It is degraded (a node is down) and still "
                              "bills the full rate."))
    if c.owner_id is None:
        blocks.append(context("Nobody has claimed it (found at AI Reserve, not launched through "
                              "the bot), so this reminder goes to the approvers."))
    if c.status in TERMINABLE:
        value = ReminderRef(cluster_id=c.id, hour=f.hour or 0).pack()
        blocks.append(context("*Keep running* only says you know: the reminders go on while it "
                              "bills."))
        blocks.append(actions(terminate_button(c),
                              button("Keep running", action_id=Action.KEEP_RUNNING, value=value)))
    else:
        blocks.append(context(f"It is {c.status.value} now."))
    hour = f" (hour {f.hour})" if f.hour else ""
    ends = (f"; it will be terminated at {when(terminate_at)}" if terminate_at is not None
            else " and bills until someone terminates it")
    text = (f"Cluster {escaped(c.id, ID_MAX)} has accrued {money(f.accrued_cents)}{hour} at "
            f"{hourly(rate)}{ends}")
    return compose(text, blocks, key="reminder")


def _ends(terminate_at: datetime | None, *, now: datetime) -> str:
    if terminate_at is None:
        return "It bills until someone terminates it"
    left = duration(max(0.0, (terminate_at - now).total_seconds()))
    return (f"It will be terminated at *{when(terminate_at)}* (in {left}), at the end of its "
            "approved envelope, unless the envelope is extended")


def untracked_cluster(c: ClusterRecord, *, now: datetime) -> Message:
    """The approvals-channel message for a cluster found at AI Reserve but not launched here."""
    hours = f"{c.accrued_hours} billed hour{'s' if c.accrued_hours != 1 else ''}"
    blocks: list[Block] = [
        header(f"Untracked cluster {c.id}"),
        section(cluster_state_line(c, now=now)),
        section(f"{cluster_ref(c)}: *{escaped(shape_label(c.shape, c.accelerator_name))}* in "
                f"{escaped(c.location, ID_MAX)} · *{hourly(c.hourly_cents)}* for the whole cluster "
                f"· {money(c.hourly_cents * 24)} per day\nAccrued so far: "
                f"{money(c.accrued_cents)} over {hours} (AI Reserve's figures)"),
    ]
    ended = c.status in (ClusterState.TERMINATED, ClusterState.FAILED)
    if c.owner_id is None:
        blocks.append(context(f"{ADOPTED} {UNCLAIMED_NOTE}"))
    else:
        blocks.append(context(f"{ADOPTED} Claimed by {user(c.owner_id)}: the reminders go to "
                              "them."))
    buttons: list[ButtonElement] = []
    if c.owner_id is None and not ended:
        buttons.append(claim_button(c))
    if c.status in TERMINABLE:
        buttons.append(terminate_button(c))
    if buttons:
        blocks.append(actions(*buttons))
    who = "unclaimed" if c.owner_id is None else "claimed"
    return compose(f"Untracked cluster {escaped(c.id, ID_MAX)} found at AI Reserve ({who}): "
                   f"{escaped(shape_label(c.shape, c.accelerator_name))} at "
                   f"{hourly(c.hourly_cents)}", blocks, key="untracked")


def logs_message(cluster_id: str, node: int, lines: Sequence[tuple[datetime, str, str]]) -> Message:
    """The last lines of one node's log, newest last, cut from the top to fit one message."""
    ref = code(escaped(cluster_id, ID_MAX))
    rendered = [_log_line(ts, stream, line) for ts, stream, line in lines]
    kept: list[str] = []
    room = LOG_BUDGET
    for line in reversed(rendered):  # newest first, so the oldest are the ones dropped
        room -= payload_len(line) + 1
        if room < 0:
            break
        kept.append(line)
    kept.reverse()
    blocks: list[Block] = [header(f"Logs of {cluster_id}, node {node}")]
    if not kept:
        blocks.append(section(f"No log lines from node {node} of {ref} yet."))
    else:
        dropped = len(rendered) - len(kept)
        summary = f"Last {len(kept)} line{'s' if len(kept) != 1 else ''} of node {node} of {ref}"
        summary += f" ({dropped} earlier not shown)." if dropped else "."
        blocks.append(section(f"{summary} Times in UTC, newest last."))
        blocks.extend(section(f"```{chunk}```") for chunk in _chunks(kept))
    blocks.append(context(f"Only you can see this. Node 0 is the primary; `/cluster logs "
                          f"{escape(truncate(cluster_id, ID_MAX))} node=<rank>` shows another."))
    text = f"Last {len(kept)} log lines of node {node} of {escaped(cluster_id, ID_MAX)}"
    return compose(text, blocks, key="logs")


# --- thread notices, one renderer per kind ------------------------------------------------------


def _degraded(n: Notice, c: ClusterRecord) -> _Parts:
    f = n.facts
    rate = hourly(c.hourly_cents)
    attempts = _attempts_max(n, c)
    down = _ranks(f.down_ranks)
    body = (f":large_orange_circle: {cluster_ref(c)} *is degraded: {down} down.* The whole "
            f"cluster keeps billing at its locked *{rate}* ({money(c.hourly_cents * 24)} per "
            "day) until someone acts.")
    if recovery.exhausted(c):
        # Seen only now (the bot was away for the whole episode): recovery is already over.
        parts = _Parts(f"{escaped(c.id, ID_MAX)} is degraded ({down} down); recovery is "
                       f"exhausted and it keeps billing {rate} — terminate is the way out",
                       body, [recovery_blocks.exhausted_note(c)])
        if c.status in TERMINABLE:  # terminate only (the escalation follows on its own)
            parts.buttons.append(terminate_button(c))
        return parts
    if f.auto_recovery:
        upto = f" (up to {attempts} attempts)" if attempts else ""
        note = ("Automatic recovery is on: AI Reserve restarts the down nodes on the same "
                f"hardware at its next health pass{upto}.")
    else:
        note = ("Automatic recovery is off: nothing happens until someone recovers it, turns "
                "automatic recovery on, or terminates it.")
    parts = _Parts(f"{escaped(c.id, ID_MAX)} is degraded ({down} down) and keeps billing {rate} "
                   "until someone acts", body, [note])
    if c.status in TERMINABLE:
        parts.buttons.append(recovery_blocks.recover_button(c, attempts))
        if not f.auto_recovery:
            parts.buttons.append(recovery_blocks.autorecover_button(c, attempts))
        parts.buttons += [terminate_button(c), *duty_buttons(c, f.episode, None)]
    return parts


def _recovery_started(n: Notice, c: ClusterRecord) -> _Parts:
    f = n.facts
    of = f" of {f.attempts_max}" if f.attempts_max else ""
    attempt = f"Recovery attempt {f.attempt}{of}" if f.attempt else "A recovery attempt"
    kind, how = (("manual", "someone asked for it") if f.manual else
                 ("automatic", "AI Reserve's health pass started it"))
    return _Parts(f"{escaped(c.id, ID_MAX)}: {attempt.lower()} started ({kind})",
                  f":wrench: *{attempt} started* for {cluster_ref(c)} ({kind}: {how}).",
                  ["Down nodes restart one by one on the same hardware; healthy nodes, the "
                   "volume and the rate are untouched."])


def _node_recovered(n: Notice, c: ClusterRecord) -> _Parts:
    rank = _rank(n.facts.rank)
    return _Parts(f"{escaped(c.id, ID_MAX)}: {rank} is back",
                  f":white_check_mark: *{rank.capitalize()} is back* in {cluster_ref(c)}, on "
                  "the same hardware with the same interconnect address.")


def _node_skipped(n: Notice, c: ClusterRecord) -> _Parts:
    rank = _rank(n.facts.rank)
    return _Parts(f"{escaped(c.id, ID_MAX)}: AI Reserve couldn't bring {rank} back",
                  f":warning: *AI Reserve couldn't bring {rank} back* in {cluster_ref(c)}. The "
                  "attempt goes on with the remaining nodes.")


def _recovered(n: Notice, c: ClusterRecord) -> _Parts:
    f = n.facts
    lead = (f"It was degraded for {duration(f.degraded_seconds)}"
            if f.degraded_seconds is not None else "It was degraded")
    rate = hourly(c.hourly_cents)
    if f.degraded_charges is None or f.degraded_cost_cents is None:
        tail = f" {lead}; degraded time bills the full locked {rate}."
    elif f.degraded_charges == 0:
        tail = (f" {lead}. No hourly charge fell inside it: the hour it was in had already "
                f"been charged in full at {rate} (degraded time bills like running time).")
    else:
        hours = f"{f.degraded_charges} hourly charge{'s' if f.degraded_charges != 1 else ''}"
        tail = (f" {lead}, which cost *{money(f.degraded_cost_cents)}*: AI Reserve made {hours} "
                f"of {rate} inside it (degraded clusters bill the full rate).")
    return _Parts(f"{escaped(c.id, ID_MAX)} is running again",
                  f":large_green_circle: {cluster_ref(c)} *is running again.*{tail}")


def _exhausted(n: Notice, c: ClusterRecord) -> _Parts:
    f = n.facts
    rate = hourly(c.hourly_cents)
    attempts = _attempts_max(n, c)
    spent = f"All {attempts} recovery attempts are" if attempts else "Every recovery attempt is"
    verb = "is" if len(f.down_ranks) == 1 else "are"
    down = f" {_ranks(f.down_ranks).capitalize()} {verb} still down." if f.down_ranks else ""
    body = (f":red_circle: {cluster_ref(c)}: *{spent} spent.*{down} It still bills the full "
            f"*{rate}* ({money(c.hourly_cents * 24)} per day). Terminate is the way out.")
    parts = _Parts(f"{escaped(c.id, ID_MAX)}: recovery gave up; it still bills {rate} — "
                   "terminate is the way out", body)
    if c.status in TERMINABLE:
        parts.buttons.append(terminate_button(c))
    return parts


def _failed(n: Notice, c: ClusterRecord) -> _Parts:
    reason = error_words(c.last_error or n.facts.termination_reason)
    notes = [f"Why: {escaped(reason, ERROR_MAX)}"] if reason else []
    return _Parts(f"{escaped(c.id, ID_MAX)} failed while provisioning; it was never billed",
                  f":x: {cluster_ref(c)} *failed while provisioning.* It was never billed.",
                  notes)


def _grace_terminated(n: Notice, c: ClusterRecord) -> _Parts:
    body = (f":warning: *AI Reserve terminated* {cluster_ref(c)} because the payment grace "
            f"ran out on an unpaid hour. It had accrued {money(n.facts.accrued_cents)}"
            + (f", *{money(n.facts.unpaid_cents)} of it unpaid*" if n.facts.unpaid_cents else "")
            + " (AI Reserve's figures).")
    return _Parts(f"AI Reserve terminated {escaped(c.id, ID_MAX)}: payment grace ran out", body,
                  _volume_notes(c))


def _terminated_outside(n: Notice, c: ClusterRecord) -> _Parts:
    body = (f":checkered_flag: {cluster_ref(c)} *was terminated outside the bot* (at AI "
            f"Reserve directly). Billing has stopped; it had accrued "
            f"{money(n.facts.accrued_cents)} (AI Reserve's figure).")
    why = why_terminated(reason=n.facts.termination_reason, requested_by=None)
    notes = [f"Why: {escape(why)}"]
    return _Parts(f"{escaped(c.id, ID_MAX)} was terminated outside the bot", body,
                  notes + _volume_notes(c))


_RENDERERS: dict[NoticeKind, Callable[[Notice, ClusterRecord], _Parts]] = {
    NoticeKind.DEGRADED: _degraded,
    NoticeKind.RECOVERY_STARTED: _recovery_started,
    NoticeKind.NODE_RECOVERED: _node_recovered,
    NoticeKind.NODE_SKIPPED: _node_skipped,
    NoticeKind.RECOVERED: _recovered,
    NoticeKind.EXHAUSTED: _exhausted,
    NoticeKind.FAILED: _failed,
    NoticeKind.GRACE_TERMINATED: _grace_terminated,
    NoticeKind.TERMINATED_OUTSIDE: _terminated_outside,
}


# --- buttons and small pieces --------------------------------------------------------------------


def claim_button(c: ClusterRecord) -> ButtonElement:
    return button(
        "Claim", action_id=Action.CLAIM, value=ClusterRef(cluster_id=c.id).pack(),
        style="primary",
        confirm=confirm(
            "Claim this cluster?",
            f"You become the owner of {truncate(c.id, ID_MAX)}: its reminders come to you. It "
            f"bills {money(c.hourly_cents)} per hour until someone terminates it.",
            ok="Claim it",
        ),
    )


def _attempts_max(n: Notice, c: ClusterRecord) -> int | None:
    if n.facts.attempts_max:
        return n.facts.attempts_max
    return c.observed.attempts_max if c.observed else None


def _rank(rank: int | None) -> str:
    return f"node rank {rank}" if rank is not None else "a node"


def _ranks(ranks: Sequence[int]) -> str:
    """`"node rank 1"`, `"nodes rank 1, 2 and 3"`, `"a node"` when the provider listed none."""
    if not ranks:
        return "a node"
    if len(ranks) == 1:
        return f"node rank {ranks[0]}"
    shown = [str(r) for r in ranks[:RANKS_SHOWN]]
    if len(ranks) > RANKS_SHOWN:
        shown.append(f"{len(ranks) - RANKS_SHOWN} more")
    return f"nodes rank {', '.join(shown[:-1])} and {shown[-1]}"


def _volume_notes(c: ClusterRecord) -> list[str]:
    if not c.volume_id:
        return []
    return [f":floppy_disk: The shared volume {code(escaped(c.volume_id, ID_MAX))} was kept and "
            "bills on its own until someone deletes it."]


def _log_line(ts: datetime, stream: str, line: str) -> str:
    """`21:31:05 stderr  text`: control characters flattened and backticks defused, so a line
    can neither break the code block nor ping anyone."""
    stamp = (ts.astimezone(UTC) if ts.tzinfo else ts).strftime("%H:%M:%S")
    text = _CONTROL.sub(" ", line).replace("`", "ˋ")
    label = _CONTROL.sub(" ", stream)[:6].replace("`", "ˋ")
    return escape(f"{stamp} {label:<6} {truncate(text, LOG_LINE_MAX)}")


def _chunks(lines: Sequence[str]) -> list[str]:
    """Lines grouped into code blocks of at most `LOG_SECTION_BUDGET` payload characters."""
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    for line in lines:
        cost = payload_len(line) + 1
        if current and size + cost > LOG_SECTION_BUDGET - 6:
            chunks.append("\n".join(current))
            current, size = [], 0
        current.append(line)
        size += cost
    if current:
        chunks.append("\n".join(current))
    return chunks
