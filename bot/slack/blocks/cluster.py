"""Everything about a cluster once asked for: the progress message, the owner's connection DM,
`/cluster list`, `/cluster status` and the terminate prompt.

Only `connection_dm` carries SSH details; it goes to the owner's DM and nowhere else. A cluster
the watcher adopted (found at AI Reserve, not launched through the bot) may have no owner yet:
it shows as "unclaimed" wherever an owner would be.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from slack_sdk.models.blocks import Block, ButtonElement

from bot.domain import recovery
from bot.domain.charges import HOUR, accruals_before, hour_in_progress
from bot.domain.connection import ConnectionDetails
from bot.domain.models import (
    Approval,
    ClusterRecord,
    ClusterState,
    Decision,
    LaunchRequest,
    NodeSummary,
    QuoteInfo,
    RequestStatus,
)
from bot.domain.readiness import role_word
from bot.domain.reasons import error_words, why_terminated
from bot.slack.blocks import recovery as recovery_blocks
from bot.slack.blocks.approval import (
    SpendThresholds,
    approvers,
    auto_approved,
    deciders,
    withdrawn_line,
)
from bot.slack.blocks.format import *
from bot.slack.blocks.message import *
from bot.slack.blocks.tunnels import tunnel_blocks
from bot.slack.ids import Action, ClusterRef, WithdrawRef

TERMINABLE = (ClusterState.PROVISIONING, ClusterState.RUNNING, ClusterState.DEGRADED)
UNCLAIMED = "unclaimed"
ADOPTED = "Found at AI Reserve, not launched through the bot."
UNCLAIMED_NOTE = "It is watched and reminded to the approvers until someone claims it."
READINESS_CAVEAT = ("_Running_ is infrastructure readiness, not your app's health: run your own "
                    "readiness check before sending traffic.")
# Sizes in JSON payload characters (`payload_len`): a list stays well under Slack's ~13k budget.
SECTION_BUDGET = 2800


def request_progress(
    req: LaunchRequest,
    q: QuoteInfo,
    cluster: ClusterRecord | None,
    *,
    now: datetime,
    approvals: Sequence[Approval] = (),
    policy: SpendThresholds | None = None,
    serving: str | None = None,
) -> Message:
    """The one message per request in the requester's channel, edited as the request moves."""
    if cluster is not None:
        state = cluster_state_line(cluster, now=now)
        notes = _cluster_notes(cluster, auto_recovery=cluster.auto_recovery)
        if serving:  # running is not serving (bot/slack/blocks/readiness.py)
            state += "\n" + serving
    else:
        state, notes = _request_state_line(req, approvals, policy), []
        if req.status is RequestStatus.LAUNCHING and req.last_error:
            notes.append(f"Launch: {_error(req.last_error)}")  # each step of the saga
    label = escaped(shape_label(q.spec.shape, q.accelerator_name))
    who = f"Requested by {user(req.requester_id)} · request {code(escaped(req.id, ID_MAX))}"
    if cluster is not None:
        who += f" · cluster {cluster_ref(cluster)}"
    blocks: list[Block] = [
        section(state),
        section(f"*{label}* in {escaped(q.location, ID_MAX)} · *{hourly(req.hourly_cents)}* "
                f"for the whole cluster · {money(req.hourly_cents * 24)} per day\n{who}"),
        *(context(note) for note in notes),
    ]
    if cluster is not None and cluster.status in TERMINABLE:
        blocks.append(actions(terminate_button(cluster)))
    elif cluster is None and req.status in (RequestStatus.PENDING, RequestStatus.WAITING):
        blocks.append(actions(withdraw_button(req)))
    fallback = f"{escaped(shape_label(q.spec.shape, q.accelerator_name))}: {plain_line(state)}"
    return compose(fallback, blocks, key="progress")


def connection_dm(c: ClusterRecord, details: ConnectionDetails) -> Message:
    """The owner's DM with SSH commands and interconnect addresses (never posted in a channel)."""
    lines = []
    for node in details.nodes:
        ssh = code(escaped(node.ssh_command, 300)) if node.ssh_command else "_not reachable yet_"
        addr = (f" · interconnect {code(escaped(node.interconnect_address, ID_MAX))}"
                if node.interconnect_address else "")
        role = f" ({escaped(role_word(node.role), 40)})" if node.role else ""
        lines.append(f"• rank {node.rank}{role}: {ssh}{addr}")
    lines = fit_lines(lines, SECTION_BUDGET, "…and {n} more nodes")
    rate = hourly(c.hourly_cents)
    blocks: list[Block] = [
        header(f"Cluster {c.id} is ready"),
        section(f"{cluster_ref(c)}: {escaped(shape_label(c.shape, c.accelerator_name))} in "
                f"{escaped(c.location, ID_MAX)}\n*Primary node (rank 0):*\n"
                f"```{escaped(details.primary_ssh_command, 1000)}```"),
        section("*Every node*\n" + ("\n".join(lines) or "_no nodes listed_")),
        *tunnel_blocks(details),
        *([context(f":file_cabinet: The shared volume is mounted at "
                   f"{code(escaped(details.volume_mount, 200))} on every node.")]
          if details.volume_mount else []),
        context(f":moneybag: It bills {rate} ({money(c.hourly_cents * 24)} per day) until "
                f"terminated: `/cluster terminate {escape(c.id)}`"),
        context(READINESS_CAVEAT),
    ]
    return compose(f"Cluster {escaped(c.id, ID_MAX)} is ready — it bills {rate} until terminated",
                   blocks, key="connect")


BILLING_NOW = (ClusterState.RUNNING, ClusterState.DEGRADED)


def cluster_status(
    c: ClusterRecord, *, now: datetime, nodes: Sequence[NodeSummary] = ()
) -> Message:
    """`/cluster status <id>`: everything about one cluster except how to log in."""
    ready = when(c.ready_at) if c.ready_at else "not yet"
    hours = f"{c.accrued_hours} billed hour{'s' if c.accrued_hours != 1 else ''}"
    blocks: list[Block] = [
        header(f"Cluster {c.id}"),
        section(cluster_state_line(c, now=now)),
        section(fields=[
            f"*Name*\n{escaped(c.name) if c.name else '_none_'}",
            f"*Shape*\n{escaped(shape_label(c.shape, c.accelerator_name))}",
            f"*Location*\n{escaped(c.location, ID_MAX)}",
            f"*Locked rate*\n{hourly(c.hourly_cents)} ({money(c.hourly_cents * 24)} per day)",
            f"*Ready since*\n{ready}",
            f"*Accrued so far*\n{money(c.accrued_cents)} over {hours} (AI Reserve's figures)",
            f"*Owner*\n{owner_mention(c.owner_id)}",
            f"*Volume*\n{_volume(c)}",
            f"*Auto-recovery*\n{'on' if c.auto_recovery else 'off'}"
            f"{' (no attempts left)' if recovery.exhausted(c) else ''}",
            *([f"*Also notified*\n{', '.join(channel(ch) for ch in c.notify_channels)}"]
              if c.notify_channels else []),
        ]),
    ]
    if nodes:
        blocks.append(section("*Nodes*\n" + "\n".join(_node_lines(nodes))))
    episode = recovery_blocks.episode_text(c)
    if episode is not None:
        blocks.append(section(episode))
    blocks.extend(context(note) for note in _cluster_notes(c, auto_recovery=c.auto_recovery))
    if c.owner_id is None:
        found = f" {ADOPTED}" if c.adopted else ""
        blocks.append(context(f"*Unclaimed.*{found} {UNCLAIMED_NOTE} Claim it from its message "
                              "in the approvals channel."))
    elif c.adopted:
        blocks.append(context(f"Adopted: {ADOPTED}"))
    if c.status in TERMINABLE:
        blocks.append(actions(terminate_button(c)))
    state = plain_line(cluster_state_line(c, now=now))
    return compose(f"Cluster {escaped(c.id, ID_MAX)}: {state}",
                   blocks, key="status")


def terminate_prompt(c: ClusterRecord, *, now: datetime | None = None) -> Message:
    """The ephemeral answer to `/cluster terminate <id>`: one button, behind a confirm.

    With `now`, it says which hour is already paid (AI Reserve charges each started hour at
    readyAt + k·1 h, and never refunds it) and what terminating now saves."""
    rate = hourly(c.hourly_cents)
    text = (f"Terminate {cluster_ref(c)} ({escaped(shape_label(c.shape, c.accelerator_name))}, "
            f"{escaped(c.location, ID_MAX)})? It bills *{rate}* until terminated. Terminating "
            "cannot be undone: every node and its root disk are destroyed.")
    if now is not None:
        text += "\n" + _paid_hour(c, now)
    if c.volume_id:
        text += (f"\nThe shared volume {code(escaped(c.volume_id, ID_MAX))} is kept and bills "
                 "on its own until someone deletes it.")
    blocks: list[Block] = [section(text)]
    if c.status in TERMINABLE:
        blocks.append(actions(terminate_button(c)))
    else:
        blocks.append(context(f"It is already {c.status.value}: nothing to terminate."))
    return compose(f"Terminate cluster {escaped(c.id, ID_MAX)} ({rate})?", blocks,
                   key="terminate")


def _paid_hour(c: ClusterRecord, now: datetime) -> str:
    """The current hour is already paid; terminating now saves the charges still to come."""
    if c.ready_at is None and c.status is ClusterState.PROVISIONING:
        return NOTHING_BILLED_YET.strip()
    if c.ready_at is None or c.status not in BILLING_NOW:
        return "Nothing is being charged for it now: terminating costs nothing more."
    paid_until = c.ready_at + HOUR * accruals_before(c.ready_at, now)
    hour = hour_in_progress(c, now)
    if hour is not None and not hour[1]:
        # AI Reserve charges a mark only while a node runs: this hour was not charged.
        return (f":moneybag: The hour in progress was *not charged*: every node was down at "
                f"{when(hour[0])}, so AI Reserve skipped that hour's charge. Terminating now "
                f"saves the charge of {money(c.hourly_cents)} at {when(paid_until)} (made if a "
                f"node runs then) and every one after it ({money(c.hourly_cents * 24)} per "
                "day).")
    return (f":moneybag: The hour in progress is already paid ({money(c.hourly_cents)}, charged "
            f"in full when it began; it runs until {when(paid_until)}). Terminating now saves "
            f"the next charge of {money(c.hourly_cents)} at {when(paid_until)} and every one "
            f"after it ({money(c.hourly_cents * 24)} per day).")


def _charge_minute(c: ClusterRecord) -> str:
    if c.ready_at is None:
        return ""
    return f" at :{c.ready_at.astimezone(UTC):%M} past each hour"


# Before every node is ready (readyAt) AI Reserve has charged nothing (contract: billing starts
# at readyAt, with the first hour's charge). What the bot knows of readiness is a poll old: the
# cluster may be ready — and its first hour charged — by the time this is read, so it is free
# to terminate only *until* it is ready, never plainly "free" (issue 27.4).
NOTHING_BILLED_YET = ("AI Reserve charges the first hour when every node is ready: it is free "
                      "to terminate until it is ready. ")


def withdraw_button(req: LaunchRequest) -> ButtonElement:
    """The requester's Withdraw, on their request's message while it waits for approval (the
    service refuses anyone else, saying who can do what)."""
    return button(
        "Withdraw", action_id=Action.WITHDRAW, value=WithdrawRef(request_id=req.id).pack(),
        confirm=confirm(
            "Withdraw this request?",
            f"Launch request {truncate(req.id, ID_MAX)} will not be launched; its approval card "
            "will say you withdrew it. Only the requester can withdraw it.",
            ok="Withdraw", deny="Keep it", danger=True,
        ),
    )


def terminate_button(c: ClusterRecord) -> ButtonElement:
    """Terminate (danger), with a confirm that states the rate and that it is final."""
    rate, per_day = money(c.hourly_cents), money(c.hourly_cents * 24)
    # The id is cut short in the text so a long one can never push the rate out of the dialog.
    return button(
        "Terminate", action_id=Action.TERMINATE, value=ClusterRef(cluster_id=c.id).pack(),
        style="danger",
        confirm=confirm(
            f"Terminate cluster {c.id}?",
            f"Cluster {truncate(c.id, ID_MAX)} bills {rate} per hour ({per_day} per day) until "
            f"terminated. "
            + (NOTHING_BILLED_YET if c.ready_at is None else
               f"The current hour is already paid (AI Reserve charges each started "
               f"hour{_charge_minute(c)}); terminating now saves {rate} for every further "
               "hour. ")
            + "It cannot be undone: every node and its root disk are destroyed.",
            ok="Terminate", deny="Keep it running", danger=True,
        ),
    )


def cluster_state_line(c: ClusterRecord, *, now: datetime) -> str:
    """The cluster's state in one emphasised mrkdwn line."""
    rate = hourly(c.hourly_cents)
    if c.status is ClusterState.PROVISIONING:
        return f":gear: *Provisioning — nodes ready {c.nodes_ready}/{c.shape.nodes}*"
    if c.status is ClusterState.RUNNING:
        since = when(c.ready_at or c.updated_at)
        return f":large_green_circle: *Running since {since} at {rate} (locked)*"
    if c.status is ClusterState.DEGRADED and recovery.exhausted(c):
        return (f":red_circle: *Degraded, and recovery is exhausted.* It keeps billing the full "
                f"{rate} until someone terminates it: terminate is the way out.")
    if c.status is ClusterState.DEGRADED:
        return (f":large_orange_circle: *Degraded: a node is down.* The cluster keeps billing "
                f"the full {rate} until someone acts.")
    if c.status is ClusterState.TERMINATING:
        return ":stop_button: *Terminating* — billing has stopped"
    if c.status is ClusterState.TERMINATED:
        ended = c.terminated_at or c.updated_at
        began = c.ready_at or c.created_at
        hours = f"{c.accrued_hours} billed hour{'s' if c.accrued_hours != 1 else ''}"
        return (f":checkered_flag: *Terminated at {when(ended)} after "
                f"{duration((ended - began).total_seconds())}.* Cost: "
                f"{money(c.accrued_cents)} over {hours} (AI Reserve's figures)")
    return f":x: *Cluster failed*: {_error(c.last_error)}"


def _request_state_line(req: LaunchRequest, approvals: Sequence[Approval],
                        policy: SpendThresholds | None) -> str:
    status = req.status
    if status in (RequestStatus.APPROVED, RequestStatus.LAUNCHING):
        if req.decided_by is None and not approvers(req, approvals):
            return f":rocket: *{auto_approved(policy).capitalize()} — launching*"
        return f":rocket: *Approved by {deciders(req, approvals, Decision.APPROVE)} — launching*"
    if status is RequestStatus.LAUNCHED:
        ref = f" as {code(escaped(req.cluster_id, ID_MAX))}" if req.cluster_id else ""
        return f":rocket: *Launched{ref}*"
    if status is RequestStatus.LAUNCH_FAILED:
        # The error may be a sentence with its own full stop: one is enough.
        return (f":warning: *Launch failed*: {_error(req.last_error).rstrip('.')}. Kept: an "
                "approver or the requester can retry.")
    if status is RequestStatus.REJECTED:
        return f":no_entry: *Rejected* by {deciders(req, approvals, Decision.REJECT)}"
    if status is RequestStatus.SUPERSEDED:
        return ":arrows_counterclockwise: *The quote changed — waiting for a new approval*"
    if status is RequestStatus.FAILED:
        return f":x: *Failed*: {_error(req.last_error)}"
    if status is RequestStatus.CANCELLED:
        return ":heavy_multiplication_x: *Cancelled*"
    if status is RequestStatus.WITHDRAWN:
        return f":leftwards_arrow_with_hook: *{withdrawn_line(req)}*"
    if status is RequestStatus.WAITING:
        return waiting_line(req)
    return ":hourglass_flowing_sand: *Waiting for approval*"


def waiting_line(req: LaunchRequest) -> str:
    """A request waiting for stock: until when, and what happens when stock appears."""
    until = f" until {when(req.wait_until)}" if req.wait_until else ""
    return (f":hourglass: *Waiting for stock*{until}: it launches by itself at "
            f"{hourly(req.hourly_cents)} or less, or asks again if the rate is higher")


def _cluster_notes(c: ClusterRecord, *, auto_recovery: bool | None) -> list[str]:
    """Context lines under the state: caveats, errors and the surviving volume."""
    notes: list[str] = []
    if c.status is ClusterState.PROVISIONING:
        notes.append("Billing starts when every node is ready.")
    elif c.status is ClusterState.RUNNING:
        notes.append(READINESS_CAVEAT)
        if c.owner_id is not None:  # an unclaimed cluster has its own note (cluster_status)
            sent = "were sent" if c.connection_sent_at else "will be sent"
            notes.append(f"Connection details {sent} to {user(c.owner_id)} by DM.")
    elif c.status is ClusterState.DEGRADED:
        if c.last_error and not recovery.exhausted(c):  # its own note says it
            notes.append(f"Last error: {_error(c.last_error)}")
        if auto_recovery is not None:
            notes.append(recovery_blocks.degraded_note(c, auto_recovery=auto_recovery))
    elif c.status is ClusterState.TERMINATED:
        notes.append(f"Why: {why_ended(c)}")
        if c.volume_created_with_cluster and c.volume_id:
            notes.append(f":warning: Volume {code(escaped(c.volume_id, ID_MAX))} survives the "
                         "cluster and keeps billing until it is deleted.")
    return notes


def _node_lines(nodes: Sequence[NodeSummary]) -> list[str]:
    lines = []
    for n in nodes:
        error = f" — {_error(n.last_error, 200)}" if n.last_error else ""
        lines.append(f"• rank {n.rank} · {escaped(role_word(n.role), 40)} · "
                     f"*{escaped(n.status, 40)}* · "
                     f"{n.gpus} GPUs{error}")
    return fit_lines(lines, SECTION_BUDGET, "…and {n} more nodes")


def _volume(c: ClusterRecord) -> str:
    if not c.volume_id:
        return "none"
    origin = "created with the cluster" if c.volume_created_with_cluster else "existing"
    return f"{code(escaped(c.volume_id, ID_MAX))} ({origin}; survives terminate)"


def owner_mention(owner_id: str | None) -> str:
    """The owner as a mention, or "unclaimed" for an adopted cluster nobody has claimed yet."""
    return user(owner_id) if owner_id else UNCLAIMED


def cluster_ref(c: ClusterRecord) -> str:
    """`` `clu_…` *name* ``: the id as code, then the name when it has one (escaped, clipped)."""
    ref = code(escaped(c.id, ID_MAX))
    return f"{ref} *{escaped(c.name, NAME_MAX)}*" if c.name else ref


def _error(text: str | None, limit: int = ERROR_MAX) -> str:
    """An error from the provider (a code) or from the bot (a sentence), in words."""
    return escaped(error_words(text), limit) if text else "no reason given"


def why_ended(c: ClusterRecord) -> str:
    """Why the cluster was terminated, in words: requested by @x, envelope ran out, payment
    grace ended, terminated outside the bot, gone at AI Reserve (mrkdwn)."""
    return mrkdwn(why_terminated(reason=c.termination_reason,
                                 requested_by=c.terminate_requested_by))


def plain_line(line: str) -> str:
    """A state line reused as notification text: without emoji codes or bold markers."""
    text = line.split(" ", 1)[1] if line.startswith(":") else line
    return clip(text.replace("*", ""), 500)
