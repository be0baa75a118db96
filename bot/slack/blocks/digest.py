"""A storm's digest: one message per channel, edited in place as the storm evolves
(bot/domain/digest.py decides who is in it; this only renders).

"37 clusters degraded in us-tx — $4,620/h billing degraded", a table of the clusters (state,
owner, rate, a link to each cluster's thread), and **Recover all mine**. The rendering holds
no relative time, so an unchanged storm renders the same and is not edited again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from slack_sdk.models.blocks import Block

from bot.domain import recovery
from bot.domain.digest import burn_cents, still_degraded
from bot.domain.models import ClusterRecord, ClusterState, MessageRef
from bot.services.storms import RecoverAll
from bot.slack.blocks.cluster import cluster_ref
from bot.slack.blocks.duty import permalink
from bot.slack.blocks.format import *
from bot.slack.blocks.message import *
from bot.slack.ids import Action, DigestRef

SECTION_BUDGET = 2800  # payload characters of rows per section (Slack: 3000)
ROWS_BUDGET = 8000  # all rows together: the message stays well under ~13k

_STATE = {
    ClusterState.DEGRADED: ":large_orange_circle: degraded",
    ClusterState.RUNNING: ":large_green_circle: running again",
    ClusterState.TERMINATING: ":checkered_flag: terminating",
    ClusterState.TERMINATED: ":checkered_flag: terminated",
    ClusterState.FAILED: ":x: failed",
}


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def _where(members: Sequence[ClusterRecord]) -> str:
    places = sorted({c.location for c in members})
    return ", ".join(escaped(p, ID_MAX) for p in places[:3]) + (
        f" and {len(places) - 3} more" if len(places) > 3 else "")


def headline(members: Sequence[ClusterRecord]) -> str:
    degraded = still_degraded(members)
    if not degraded:
        return (f"Storm over: all {_plural(len(members), 'cluster')} in {_where(members)} "
                "are running again or ended")
    return (f"{_plural(len(degraded), 'cluster')} degraded in {_where(degraded)} — "
            f"{money(burn_cents(members))}/h billing degraded")


def _row(c: ClusterRecord, top: MessageRef | None) -> str:
    state = _STATE.get(c.status, c.status.value)
    if recovery.exhausted(c):
        state = ":red_circle: recovery exhausted"
    link = f" · <{permalink(top.channel_id, top.ts)}|thread>" if top else ""
    owner = user(c.owner_id) if c.owner_id else "unclaimed"
    return f"{named(c)} {state} · {hourly(c.hourly_cents)} · {owner}{link}"


def named(c: ClusterRecord) -> str:
    """The cluster as people know it: its name (or its shape, unnamed) beside its id."""
    if c.name:
        return cluster_ref(c)
    return f"{code(escaped(c.id, ID_MAX))} {escaped(shape_label(c.shape, c.accelerator_name), 60)}"


def digest(digest_id: str, members: Sequence[ClusterRecord],
           tops: Mapping[str, MessageRef]) -> Message:
    """The digest as it stands: degraded clusters first (dearest first), then the others."""
    degraded = still_degraded(members)
    order = sorted(members, key=lambda c: (c.status is not ClusterState.DEGRADED,
                                           -c.hourly_cents, c.id))
    blocks: list[Block] = [header("Storm: " + ("over" if not degraded else
                                                _plural(len(degraded), "cluster") +
                                                " degraded")),
                           section(f"*{headline(members)}*")]
    back = sum(1 for c in members if c.status is ClusterState.RUNNING)
    ended = sum(1 for c in members if c.status in (ClusterState.TERMINATING,
                                                    ClusterState.TERMINATED,
                                                    ClusterState.FAILED))
    blocks.append(context(f"{_plural(len(members), 'cluster')} in this storm: "
                          f"{len(degraded)} degraded · {back} running again · {ended} ended. "
                          "Each cluster's thread has its own story; owners are told there."))
    rows = fit_lines([_row(c, tops.get(c.id)) for c in order], ROWS_BUDGET,
                     "…and {n} more: `/cluster list` shows every cluster.")
    chunk: list[str] = []
    for row in rows:
        if sum(payload_len(r) + 1 for r in chunk) + payload_len(row) > SECTION_BUDGET:
            blocks.append(section("\n".join(chunk)))
            chunk = []
        chunk.append(row)
    if chunk:
        blocks.append(section("\n".join(chunk)))
    if degraded:
        blocks.append(context("*Recover all mine* asks AI Reserve for one recovery attempt on "
                              "each of *your* degraded clusters here (not those whose recovery "
                              "is exhausted); only you see the answer."))
        blocks.append(actions(button("Recover all mine", action_id=Action.RECOVER_ALL_MINE,
                                     value=DigestRef(digest_id=digest_id,
                                                     degraded=len(degraded)).pack())))
    return compose(headline(members), blocks, key="digest")


def owner_dm(theirs: Sequence[ClusterRecord], ref: MessageRef | None) -> Message:
    """The owner's one DM about a storm: which of their clusters are degraded and what they
    burn; the digest (with Recover all mine) and each thread have the rest."""
    burn = money(sum(c.hourly_cents for c in theirs))
    ids = ", ".join(named(c) for c in theirs[:20])
    more = f" and {len(theirs) - 20} more" if len(theirs) > 20 else ""
    where = f" <{permalink(ref.channel_id, ref.ts)}|The storm's digest>" if ref else \
        " The storm's digest in the channel"
    body = (f":large_orange_circle: *{_plural(len(theirs), 'cluster')} of yours "
            f"{'is' if len(theirs) == 1 else 'are'} degraded* in a storm in "
            f"{_where(theirs)}: {ids}{more}. Together they bill *{burn}/h* until someone acts."
            f"{where} has *Recover all mine*; each cluster's thread has its own buttons.")
    return compose(f"{_plural(len(theirs), 'cluster')} of yours degraded in a storm — "
                   f"{burn}/h", [section(body)], key="digest.owner")


def recover_all_said(done: RecoverAll) -> str:
    """The presser's private answer: what was asked for, and what was not, with why."""
    lines = []
    if done.started:
        lines.append(f"Recovery attempt started on {_plural(len(done.started), 'cluster')} of "
                     "yours: " + ", ".join(f"`{c.id}`" for c in done.started) + ".")
    for c, why in done.skipped:
        lines.append(f"`{c.id}` not recovered: {why}")
    if not done.started:
        lines.insert(0, "No recovery attempt was started; nothing was changed.")
    return "\n".join(lines)
