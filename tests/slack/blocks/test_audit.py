import json
from datetime import timedelta
from typing import Any

from bot.domain.models import AuditEntry, ClusterState
from bot.slack.blocks.audit import audit_list, receipt
from bot.slack.blocks.message import Message
from tests.slack.blocks import *


def _entry(**changes: Any) -> AuditEntry:
    fields: dict[str, Any] = {"at": NOW, "actor_id": "U0BOB", "action": "approve",
                              "subject_id": "req_1", "amount_cents": 6253, "outcome": "ok"}
    fields.update(changes)
    return AuditEntry(**fields)


def _clean(msg: Message, *, relaunch: bool = False, chart: bool = False) -> str:
    """The message's text, checked: no secret in it, and only the buttons asked for."""
    text = checked_text(msg)
    assert SECRET not in text and SSH_KEY not in text
    assert [b["action_id"] for b in buttons(msg)] == \
        (["cluster_hours_chart"] if chart else []) + (["volume_relaunch"] if relaunch else [])
    return text


def test_audit_list_newest_first_with_every_column():
    entries = [
        _entry(at=NOW - timedelta(hours=2), actor_id="U0ALICE", action="request"),
        _entry(at=NOW, actor_id=None, action="enforce_envelope", subject_id="clu_9xQe1",
               amount_cents=187_59, detail="envelope spent"),
        _entry(at=NOW - timedelta(hours=1), action="approve", outcome="refused",
               detail="self-approval"),
        _entry(at=NOW - timedelta(minutes=30), action="launch", outcome="failed",
               amount_cents=None, detail="capacity_unavailable"),
    ]
    msg = audit_list(entries, subject_id=None, now=NOW)
    text = _clean(msg)
    lines = [line for line in text.splitlines() if line.startswith("• ")]
    assert len(lines) == 4
    assert lines[0].startswith("• <!date^")
    assert ("· the bot · *enforce_envelope* · `clu_9xQe1` · $187.59 · ✅ ok — envelope spent"
            in lines[0])
    assert "· <@U0BOB> · *launch* · `req_1` · ⚠️ failed — capacity_unavailable" in lines[1]
    assert "· <@U0BOB> · *approve* · `req_1` · $62.53/h · ⛔ refused — self-approval" in lines[2]
    assert "· <@U0ALICE> · *request* · `req_1` · $62.53/h · ✅ ok" in lines[3]
    assert msg.text == "Audit trail: 4 entries"


def test_audit_list_for_one_subject_and_empty():
    msg = audit_list([_entry()], subject_id="req_1", now=NOW)
    _clean(msg)
    assert block_dicts(msg)[0]["text"]["text"] == "Audit trail of req_1"
    assert "1 entry of `req_1`, newest first" in all_text(msg)
    empty = audit_list([], subject_id="clu_9xQe1", now=NOW)
    _clean(empty)
    assert "No audit entries of `clu_9xQe1` yet." in all_text(empty)
    assert "No audit entries yet." in all_text(audit_list([], subject_id=None, now=NOW))


def test_unknown_outcome_is_shown_escaped():
    text = all_text(audit_list([_entry(outcome="<!here>")], subject_id=None, now=NOW))
    assert "&lt;!here&gt;" in text


def test_audit_list_summarises_older_entries_within_limits():
    entries = [_entry(at=NOW - timedelta(minutes=i), subject_id=f"req_{i}", detail=HOSTILE * 3,
                      actor_id=f"U{i:06d}", action=HOSTILE)
               for i in range(5000)]
    msg = audit_list(entries, subject_id=HOSTILE, now=NOW)
    _clean(msg)
    # The trail is an ephemeral: a person in a detail renders as a mention (it pings nobody).
    assert_escaped(msg, user_mentions_kept=True)
    text = all_text(msg)
    assert "older entries" in text
    assert "`req_0`" in text and "`req_4999`" not in text  # the newest kept
    assert len(json.dumps(msg.as_kwargs())) < 13_000


def test_receipt_sums_up_the_cluster():
    c = make_cluster(status=ClusterState.TERMINATED, terminated_at=NOW,
                     ready_at=NOW - timedelta(hours=3, minutes=10), accrued_hours=4,
                     accrued_cents=4 * 6253, lifetime_hours=72, extended_by="U0CAROL",
                     terminate_requested_by="U0ALICE", termination_reason="user_requested")
    msg = receipt(c, requester="U0ALICE", approvers=["U0BOB", "U0CAROL"], auto_approved=False,
                  now=NOW)
    text = _clean(msg, relaunch=True, chart=True)  # the kept volume: relaunch the same shape on it
    assert "*Receipt* for `clu_9xQe1` *dsv3-serve*: $250.12 over 4 billed hours" in text
    assert "*Total cost*\n*$250.12* (AI Reserve's figure)" in text
    assert "*Billed hours*\n4" in text
    assert "*Ran*\n<!date^" in text and "(3 h 10 min)" in text
    assert "*Locked rate*\n$62.53/h ($1,500.72 per day)" in text
    assert "*Requested by*\n<@U0ALICE>" in text
    assert "*Approved by*\n<@U0BOB> and <@U0CAROL>" in text
    assert "*Envelope*\n72 hours approved (≈ $4,502.16), extended by <@U0CAROL>" in text
    assert "*Why it ended*\nrequested by <@U0ALICE>" in text
    assert "user_requested" not in text  # no raw provider code reaches a person
    assert "volume `vol_3kP0` is not part of this receipt" in text
    assert msg.text == "Receipt for cluster clu_9xQe1: $250.12 over 4 billed hours at $62.53/h"


def test_receipt_auto_approved_never_ready_and_adopted():
    c = make_cluster(status=ClusterState.TERMINATED, ready_at=None, accrued_cents=0,
                     accrued_hours=0, volume_id=None, adopted=True, owner_id=None)
    msg = receipt(c, requester=None, approvers=[], auto_approved=True, now=NOW)
    text = _clean(msg)
    assert "*Approved by*\nauto-approved by the spend policy" in text
    assert "never became ready (never billed)" in text
    assert "*Requested by*\nnobody: found at AI Reserve" in text
    assert "*Envelope*\nnone" in text and "volume" not in text
    running = make_cluster(terminated_at=None, ready_at=NOW - timedelta(hours=1))
    text = all_text(receipt(running, requester="U0ALICE", approvers=[], auto_approved=False,
                            now=NOW))
    assert "(1 h)" in text and "*Approved by*\n_not recorded_" in text


def test_receipt_extreme_input():
    c = make_cluster(**EXTREME_CLUSTER, status=ClusterState.TERMINATED, terminated_at=NOW,
                     accrued_cents=10**12, accrued_hours=10**6, lifetime_hours=10**6,
                     extended_by="U0EVIL", terminate_requested_by="U0EVIL")
    msg = receipt(c, requester="U0EVIL", approvers=[f"U{i:05d}" for i in range(500)],
                  auto_approved=False, now=NOW)
    _clean(msg, relaunch=True, chart=True)
    assert_escaped(msg, user_mentions_kept=True)  # the mentions are ours, by design
    assert "and 495 more" in all_text(msg)
