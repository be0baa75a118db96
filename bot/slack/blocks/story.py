"""The cluster's thread as its story, and the reject-with-a-reason form.

`story(…)` reads the stored state of a request and its cluster and returns each step that has
happened as (key, words): requested, approved (by whom) or rejected (with the reason),
launching, launched, ready, connection details sent (never the details). The notifier posts each
key once into the thread (the outbox), so rendering it again after every change, or after a
restart, adds only what is new; every watcher notice and the receipt follow in the same thread.
"""

from __future__ import annotations

from collections.abc import Sequence

from slack_sdk.models.blocks import InputBlock, PlainTextInputElement
from slack_sdk.models.views import View

from bot.domain.models import Approval, ClusterRecord, Decision, LaunchRequest, RequestStatus
from bot.slack import ids
from bot.slack.blocks.format import ID_MAX, code, escaped, hourly, user, when
from bot.slack.blocks.message import Message, compose, plain, section

FIELD_REASON = "reject_reason"
_DECIDED = (RequestStatus.APPROVED, RequestStatus.LAUNCHING, RequestStatus.LAUNCHED,
            RequestStatus.LAUNCH_FAILED)


def story(req: LaunchRequest, approvals: Sequence[Approval],
          cluster: ClusterRecord | None) -> list[tuple[str, str]]:
    """Each step so far, in order, as (key, mrkdwn)."""
    steps = [("requested", f":memo: Requested by {user(req.requester_id)} "
                           f"{when(req.created_at)} at {hourly(req.hourly_cents)}"
                           + (f", planned for {req.lifetime_hours} h"
                              if req.lifetime_hours else ""))]
    for a in approvals:
        if a.decision is Decision.APPROVE:
            steps.append((f"approved/{a.quote_id}/{a.approver_id}",
                          f":white_check_mark: Approved by {user(a.approver_id)} "
                          f"{when(a.at)} at {hourly(a.hourly_cents)}"))
    if req.status is RequestStatus.REJECTED:
        why = f": “{escaped(req.decision_note, 500)}”" if req.decision_note else ""
        who = user(req.decided_by) if req.decided_by else "an approver"
        steps.append(("rejected", f":no_entry: Rejected by {who}{why}"))
    if req.status in _DECIDED and not any(a.decision is Decision.APPROVE for a in approvals):
        steps.append(("auto-approved", ":white_check_mark: Approved by the spend policy"))
    if req.status in (RequestStatus.LAUNCHING, RequestStatus.LAUNCHED) or cluster is not None:
        steps.append(("launching", ":rocket: Launching at AI Reserve"))
    if cluster is None:
        return steps
    ref = code(escaped(cluster.id, ID_MAX))
    steps.append(("launched", f":hourglass_flowing_sand: Cluster {ref} created; its nodes "
                              "are being provisioned (nothing bills until all are ready)"))
    if cluster.ready_at is not None:
        steps.append(("ready", f":large_green_circle: Ready {when(cluster.ready_at)}: every node "
                               f"runs; the first hour ({hourly(cluster.hourly_cents)}) is "
                               "charged now"))
    if cluster.connection_sent_at is not None:
        owner = user(cluster.owner_id) if cluster.owner_id else "the owner"
        steps.append(("connection", f":key: Connection details sent to {owner} by DM "
                                    f"{when(cluster.connection_sent_at)}"))
    return steps


def story_post(words: str) -> Message:
    """One step's thread post (block ids `story.*`, so a reader can tell steps from notices).
    `words` is mrkdwn already — each step escapes its own input (a reject reason) — so it is
    not escaped again: that showed a reason's `<` as `&lt;`."""
    return compose(words, [section(words)], key="story")


def story_key(req: LaunchRequest, step: str) -> str:
    """The outbox key of one step's thread post."""
    return f"story/{req.id}/{step}"


def reject_modal(ref: ids.ApprovalRef) -> View:
    """Reject with a reason: the requester sees it on the card and by DM."""
    return View(
        type="modal", callback_id=ids.View.REJECT_REASON, private_metadata=ref.pack(),
        title=plain("Reject request", 24), submit=plain("Reject", 24), close=plain("Cancel", 24),
        blocks=[
            section(f"Reject launch request {code(escaped(ref.request_id, ID_MAX))}? The "
                    "requester sees your reason."),
            InputBlock(block_id=FIELD_REASON, label=plain("Reason", 2000),
                       element=PlainTextInputElement(action_id=FIELD_REASON, multiline=True,
                                                     max_length=500,
                                                     placeholder=plain("e.g. use h100x4 first",
                                                                       150))),
        ])
