"""Small answers: `/cluster help`, the "bad input" reply and one-line notices."""

from __future__ import annotations

from functools import cache

from slack_sdk.models.blocks import Block
from slack_sdk.models.views import View

from bot.domain.extension import EXTEND_RULE
from bot.slack.blocks.format import *
from bot.slack.blocks.message import *

USAGE_MAX = 1000

# (command, what it does, example); kept in step with bot/slack/parsing.py's USAGE by hand.
COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("/cluster quote <accel>x<gpusPerNode> nodes=<N> [storage=<GB> | volume=<id>] "
     "[location=<id>] [disk=<GB>] [hours=<H>] [project=<name>]",
     "Price a cluster: N nodes (2–8) of 1–8 GPUs each. `storage=` creates a shared volume with "
     "the cluster (it survives terminate and bills until deleted); `volume=` mounts an existing "
     "one and pins the location to it; `location=` picks the place; `disk=` sizes each node's "
     "root disk. The card says at once what the spend policy would decide (auto-approve, one or "
     "two approvers, or a refusal with the numbers) and, when the place has no stock, where "
     "the same shape has some. `hours=` plans the run: its total for H started hours and "
     "per day (e.g. `hours=36`); a request from it is approved for H hours and the cluster is "
     "terminated when they run out unless its envelope is extended (`/cluster extend`). "
     "The card lists where else the shape "
     "has stock and the nearest other accelerators with the same GPU memory (*Quote this*). "
     "`project=` charges the spend to a project too (carried to the request and the cluster; "
     "a project's monthly budget in the policy is judged like a team's, and when the policy "
     "lists projects only those are taken).",
     "/cluster quote h100x8 nodes=4 storage=1000 location=us-tx disk=200"),
    ("/cluster quote template=<name> [options]", "Quote from a saved template: its shape, "
     "location, storage, orchestrator, hours and project, any option you type overriding it; "
     "*Request launch* opens the form prefilled with its image, ports, env names (values are "
     "never kept) and readiness rule.", "/cluster quote template=llama-serve hours=12"),
    ("/cluster template save <name> <cluster-id> [shared | team=<name>]", "Keep a launched "
     "cluster's settings under a name (never its secrets: env names at most). Yours alone, or "
     "`shared` with your team (everyone when you are in none). Names: lower-case letters, "
     "digits, `-`, `_`, at most 40, unique where they are kept.",
     "/cluster template save llama-serve clu_9xQe1 shared"),
    ("/cluster template list | delete <name>", "The templates you can quote from (yours, your "
     "teams', everyone's; also in the App Home), or delete one you saved.",
     "/cluster template delete llama-serve"),
    ("/cluster list", "Live clusters with their rate, age and owner; \"together\" adds up only "
     "the clusters billing now (running or degraded).", "/cluster list"),
    ("/cluster status <cluster-id>", "Everything about one cluster: state, rate, cost so far, "
     "auto-recovery, nodes.", "/cluster status clu_9xQe1"),
    ("/cluster terminate <cluster-id>", "Stop a cluster and its billing (asks to confirm; "
     "cannot be undone). The hour in progress is already paid; terminating saves every hour "
     "after it.", "/cluster terminate clu_9xQe1"),
    ("/cluster recover <cluster-id>", "One recovery attempt now for a degraded cluster: its "
     "down nodes restart on the same hardware (it keeps billing its whole rate meanwhile).",
     "/cluster recover clu_9xQe1"),
    ("/cluster autorecover <cluster-id> on|off", "Turn automatic recovery on or off: when on, "
     "AI Reserve restarts lost nodes at its next health pass (a few attempts per episode).",
     "/cluster autorecover clu_9xQe1 on"),
    ("/cluster notify <cluster-id> #channel", "Another channel gets this cluster's notices too.",
     "/cluster notify clu_9xQe1 #ml-infra"),
    ("/cluster logs <cluster-id> [node=<rank>]", "The last lines of one node's log, shown only "
     "to you (rank 0, the primary, by default).", "/cluster logs clu_9xQe1 node=1"),
    ("/cluster audit [id]", "The audit trail, newest first: who quoted, asked, approved, "
     "launched, extended or terminated what, for how much — and every refusal. With an id, "
     "only that request, cluster or volume.", "/cluster audit clu_9xQe1"),
    ("/cluster audit export [YYYY-MM]", "A month's whole audit trail as a CSV file in your DM "
     "(this month by default; approvers only).", "/cluster audit export 2026-11"),
    ("/cluster spend [YYYY-MM] [by=owner|project]", "One month's spend from AI Reserve's "
     "billed hours: the total, by owner (or by project with `by=project`), by cluster and "
     "the volumes billing on their own after their cluster (this month by default), and what "
     "the live clusters and kept volumes add by the month's end if nobody terminates "
     "anything. A chart of the month by day and by owner (or project) comes to you by DM.",
     "/cluster spend 2026-11"),
    ("/cluster volumes", "Every shared volume, fresh from AI Reserve: size, location, the "
     "cluster holding it (or orphaned), what it costs per month and its age, with *Grow* "
     "(only while detached) and *Delete* (refused while attached).", "/cluster volumes"),
    ("/cluster volume grow <volume-id> <GB>", "Grow a detached volume to a new size in GB "
     "(AI Reserve volumes only grow; later hours bill at the new size).",
     "/cluster volume grow vol_7kP2 2000"),
    ("/cluster extend <cluster-id> <hours>", "Add hours to a cluster's approved envelope "
     "(and move a planned run's automatic terminate). " + EXTEND_RULE + " The answer states "
     "the dollars added and the new total, with a Confirm.", "/cluster extend clu_9xQe1 12"),
    ("/cluster withdraw <request-id>", "Take back your own launch request while it waits "
     "for approval (its card and message say it was withdrawn; nothing launches). Pressing "
     "*Withdraw* on your request's message, or *Reject* on its card, does the same. Only the "
     "requester withdraws; an approver rejects.", "/cluster withdraw lr_3f9a0c1d2e4b"),
    ("/cluster wait <request-id> hours=<H>", "Your launch found no stock: wait for it up to H "
     "hours (at most the spend policy's `max_stock_wait_hours`). The bot re-quotes the shape, "
     "backing off, and launches at the approved rate or less; a higher rate goes back to the "
     "approvers. *Wait for stock* on a no-stock quote or a failed launch does the same; "
     "*Withdraw* or `/cluster withdraw` stops a wait.", "/cluster wait lr_3f9a0c1d2e4b hours=12"),
    ("/cluster waiting", "Every request waiting for stock: shape, place, approved rate, until "
     "when, the next look.", "/cluster waiting"),
    ("/cluster connect <cluster-id>", "DM the cluster's owner its SSH commands, interconnect "
     "addresses, volume mount path and, for the ports the launch asked for, a ready "
     "`ssh -L` line each through the primary's SSH, again, read fresh from AI Reserve (the "
     "owner or an approver asks; never posted in a channel).", "/cluster connect clu_9xQe1"),
    ("/cluster help", "This list.", "/cluster help"),
)


def help_message(*, unknown: str | None = None) -> Message:
    """Every command, what it does and an example (after "I don't know X" if `unknown`)."""
    return _help(unknown) if unknown else _plain_help()


@cache
def _plain_help() -> Message:
    """The same every time: rendered once (it is an ack's payload, sent before any work)."""
    return _help(None)


def _help(unknown: str | None) -> Message:
    blocks: list[Block] = [header("/cluster — GPU clusters on AI Reserve")]
    if unknown:
        word = escape(truncate(unknown, 40))
        blocks.append(section(f":warning: I don't know the command `{word}`. "
                              "Here is what I can do:"))
    for usage, what, example in COMMANDS:
        blocks.append(section(f"`{escape(usage)}`\n{what}\nExample: `{escape(example)}`"))
    blocks.append(context(
        "A quote is short-lived (its card says until when). *Request launch* on it asks an "
        "approver; the cluster bills its whole hourly rate from the moment every node is ready "
        "until someone terminates it."
    ))
    blocks.append(context(
        "*Idle clusters:* the launch form takes an idle rule — *idle after N minutes* (5–1440) "
        "without a new log line on rank 0 (or on every rank), and/or *done when a line "
        "matches* (`torchrun`, `training`, `slurm`, `ray` or a pattern). When it fires the "
        "owner gets one DM with the last lines, what the idle time billed and *Terminate* / "
        "*Keep for N h*; the spend policy may terminate it after a grace unless kept."
    ))
    return compose(
        "/cluster commands: quote, list, status, terminate, recover, autorecover, notify, logs, "
        "audit, spend, volumes, volume grow, extend, withdraw, connect, template, help", blocks,
        key="help")


def error_message(text: str, *, usage: str = "") -> Message:
    """The ephemeral "bad input" answer; `text` may echo user input (escaped here)."""
    body = f":warning: {mrkdwn(text)}"
    blocks: list[Block] = [section(body)]
    if usage:
        blocks.append(section(f"Usage: `{escape(truncate(usage, USAGE_MAX)).replace('`', '')}`"))
    blocks.append(context("`/cluster help` lists every command."))
    return compose(body, blocks, key="error")


def notice(text: str) -> Message:
    """A one-line notice; our own mentions/dates survive, anything else is escaped."""
    body = mrkdwn(text)
    return compose(body, [section(body)], key="notice")


def notice_modal(title: str, text: str) -> View:
    """A modal that only says something (a submission refused as a whole): Close, no Submit."""
    return View(type="modal", title=plain(title, 24), close=plain("Close", 24),
                blocks=[section(mrkdwn(text))])
