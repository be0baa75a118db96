"""The approved spend envelope of a cluster: the hours an approver said yes to.

The spend policy approves a cluster for `lifetime_hours` (bot/domain/policy.py). The envelope
sweep decides when to speak — 80 %, 100 %, an hour before an enforced termination — and these
builders only render what it decided. Money is AI Reserve's figure (`accrued_cents`) or the
locked rate times hours, never an estimate of our own. Who may extend, and when it needs
approvers, is the one rule of bot/domain/extension.py: every text here says it through
`extend_hint` and the Extend confirm states the dollars added and the new total.
"""

from __future__ import annotations

from datetime import datetime

from slack_sdk.models.blocks import Block, ButtonElement

from bot.domain.charges import uncharged_marks
from bot.domain.extension import extend_hint
from bot.domain.models import ClusterRecord
from bot.slack.blocks.cluster import TERMINABLE, cluster_ref, owner_mention, terminate_button
from bot.slack.blocks.format import *
from bot.slack.blocks.message import *
from bot.slack.ids import Action, EnvelopeRef


def envelope_warning(c: ClusterRecord, *, now: datetime, ends_at: datetime,
                     terminate_at: datetime | None = None) -> Message:
    """The owner's DM at 80 %: how much of the envelope is used, when it ends, what it cost.
    `terminate_at`: an enforced envelope's termination — the end the later DMs state too."""
    hours = envelope_hours(c, ends_at=ends_at)
    used = _percent_used(hours, now=now, ends_at=ends_at)
    end = (f"it will be terminated at *{when(terminate_at)}*, in "
           f"{duration(max(0.0, (terminate_at - now).total_seconds()))}, before AI Reserve "
           f"charges hour {hours + 1}, unless its envelope is extended"
           if terminate_at is not None else
           f"it reaches the end of its envelope at *{when(ends_at)}*, in "
           f"{duration((ends_at - now).total_seconds())}")
    body = (f":hourglass_flowing_sand: {cluster_ref(c)} has used *{used} %* of its approved "
            f"{_hours(hours)}; {end} (≈ {money(c.accrued_cents)} so far / "
            f"{money(c.hourly_cents * hours)} envelope at {hourly(c.hourly_cents)}).")
    blocks: list[Block] = [section(body), context(extend_hint(c, hours=None))]
    if c.status in TERMINABLE:
        blocks.append(context("Done with it? Terminating stops the billing now."))
        blocks.append(actions(terminate_button(c)))
    text = (f"Cluster {escaped(c.id, ID_MAX)} has used {used} % of its approved {_hours(hours)} "
            f"({money(c.accrued_cents)} so far)")
    return compose(text, blocks, key="envelope.warning")


def envelope_due(
    c: ClusterRecord,
    *,
    now: datetime,
    ends_at: datetime,
    enforced: bool,
    terminate_at: datetime | None,
    extend_hours: int | None = None,
) -> Message:
    """To the owner and the approvers at 100 %: the envelope is spent, the cluster bills on.

    `extend_hours` is what the Extend button adds (default: the envelope once more).
    """
    hours = envelope_hours(c, ends_at=ends_at)
    rate = hourly(c.hourly_cents)
    body = (f":alarm_clock: {cluster_ref(c)} *has used its approved {_hours(hours)}*: AI "
            f"Reserve charges hour {hours + 1} at {when(ends_at)}"
            f"{_in(ends_at, now)} ({money(c.accrued_cents)} so far, AI Reserve's figure). If "
            f"nobody acts, it keeps billing *{rate}* ({money(c.hourly_cents * 24)} per day).")
    blocks: list[Block] = [section(body), context(f"Owner: {owner_mention(c.owner_id)}")]
    if enforced and terminate_at is not None:
        blocks.append(section(f":warning: *Unless its envelope is extended, it will be terminated "
                              f"at {when(terminate_at)}* (in "
                              f"{duration((terminate_at - now).total_seconds())})."))
    else:
        blocks.append(context("It is not terminated automatically: it bills until someone "
                              "terminates it. Extending its envelope is the way to say it "
                              "should run on."))
    blocks.extend(_extend_and_terminate(c, extend_hours or hours))
    tail = "; it will be terminated unless its envelope is extended" if (
        enforced and terminate_at is not None) else ""
    return compose(f"Cluster {escaped(c.id, ID_MAX)} has used its approved {_hours(hours)}; "
                   f"hour {hours + 1} is charged at {when(ends_at)}{tail}", blocks,
                   key="envelope.due")


def envelope_final_warning(
    c: ClusterRecord, *, now: datetime, terminate_at: datetime, extend_hours: int | None = None
) -> Message:
    """Enforced envelopes only: the last call before the bot terminates the cluster."""
    left = duration(max(0.0, (terminate_at - now).total_seconds()))
    hours = envelope_hours(c)
    # Marks at which every node was down were not charged (bot/domain/charges.py).
    skipped = len(uncharged_marks(c))
    paid = ("are all paid for" if not skipped else
            f"have passed, {max(0, hours - skipped)} of them charged (no charge while every "
            "node was down)")
    body = (f":rotating_light: {cluster_ref(c)} *terminates in {left}* (at {when(terminate_at)}), "
            f"before AI Reserve charges hour {hours + 1}: its approved {_hours(hours)} {paid} "
            f"({money(c.accrued_cents)} so far, AI Reserve's figure). Nothing more is "
            "charged unless its envelope is extended.")
    blocks: list[Block] = [section(body), context(f"Owner: {owner_mention(c.owner_id)}")]
    blocks.extend(_extend_and_terminate(c, extend_hours or envelope_hours(c)))
    return compose(f"Cluster {escaped(c.id, ID_MAX)} terminates in {left} unless its envelope "
                   "is extended", blocks, key="envelope.final")


def envelope_extended(c: ClusterRecord, *, by: str, hours: int) -> Message:
    """The thread note once the envelope was extended (`c` is the record after it)."""
    total = f" It may now run {_hours(c.lifetime_hours)} in all." if c.lifetime_hours else ""
    body = (f":heavy_plus_sign: {user(by)} extended the envelope of {cluster_ref(c)} by "
            f"*{_hours(hours)}* (≈ {money(c.hourly_cents * hours)} at "
            f"{hourly(c.hourly_cents)}).{total}")
    return compose(f"Cluster {escaped(c.id, ID_MAX)}: envelope extended by {_hours(hours)}",
                   [section(body)], key="envelope.extended")


def envelope_hours(c: ClusterRecord, *, ends_at: datetime | None = None) -> int:
    """The approved hours: the record's, else read off the envelope's end (never below 1)."""
    if c.lifetime_hours:
        return c.lifetime_hours
    if ends_at is not None:
        start = c.ready_at or c.created_at
        return max(1, round((ends_at - start).total_seconds() / 3600))
    return 1


def extend_button(c: ClusterRecord, hours: int) -> ButtonElement:
    """Extend, behind a confirm stating the hours and dollars added and the new total; the
    spend policy decides on the press whether it applies at once or goes to approvers."""
    now_hours = c.lifetime_hours or 0
    added, total = money(c.hourly_cents * hours), money(c.hourly_cents * (now_hours + hours))
    return button(
        f"Extend +{hours} h", action_id=Action.EXTEND,
        value=EnvelopeRef(cluster_id=c.id, hours=now_hours, add=hours).pack(), style="primary",
        confirm=confirm(
            f"Extend by {_hours(hours)}?",
            f"+{_hours(hours)} ≈ {added} at {money(c.hourly_cents)} per hour: the envelope of "
            f"{truncate(c.id, ID_MAX)} becomes {now_hours + hours} h ≈ {total}. It applies at "
            "once if the spend policy auto-approves it, or you are an approver (not the owner) "
            "and one approval suffices; else approvers decide on a card.",
            ok=f"Extend +{added}",
        ),
    )


def _extend_and_terminate(c: ClusterRecord, hours: int) -> list[Block]:
    if c.status not in TERMINABLE:
        return [context(f"It is {c.status.value} now.")]
    return [context(extend_hint(c, hours=hours)),
            actions(extend_button(c, hours), terminate_button(c))]


def _percent_used(hours: int, *, now: datetime, ends_at: datetime) -> int:
    """How much of the envelope's time has gone, from the time left (0–100, rounded down)."""
    total = hours * 3600
    left = max(0.0, (ends_at - now).total_seconds())
    return max(0, min(100, int((total - left) * 100 // total)))


def _in(at: datetime, now: datetime) -> str:
    seconds = (at - now).total_seconds()
    return f" (in {duration(seconds)})" if seconds > 0 else ""


def _hours(n: int) -> str:
    return f"{n} hour{'s' if n != 1 else ''}"
