from collections.abc import Sequence
from typing import Any

import pytest

from bot.domain.models import Approval, Decision, QuoteSpec, RequestStatus, ShapeSpec
from bot.slack.blocks.approval import approval_card, approval_outcome
from bot.slack.blocks.message import Message
from bot.slack.ids import Action, ApprovalRef, RequestRef
from tests.slack.blocks import *


def test_card_states_who_what_where_and_the_rates():
    msg = approval_card(make_request(), make_quote(), now=NOW)
    text = checked_text(msg)
    assert "<@U0ALICE> asks to launch *2 × 8 NVIDIA H100 80GB SXM* in *us-tx*" in text
    assert "*$62.53/h* for the whole cluster" in text
    assert "*$1,500.72* per day" in text
    assert "$3.90/h per GPU" in text
    assert "Quote expires <!date^" in text and "(in 14 min)" in text
    assert msg.text.startswith("<@U0ALICE> asks to launch")


def test_card_shows_the_orchestrator_topology_asked_for():
    """Issue 27.12: the approver approves a Slurm or Ray cluster knowingly."""
    shape = ShapeSpec(accelerator="h100-sxm-80gb", gpus_per_node=8, nodes=2)
    slurm = make_quote(spec=QuoteSpec(shape=shape, storage_gb=1000, root_disk_gb=100,
                                      orchestrator="slurm"))
    msg = approval_card(make_request(), slurm, now=NOW)
    check_message(msg)
    assert "Orchestrator: Slurm: rank 0 is the controller, the others compute nodes" in \
        all_text(msg)
    assert "Orchestrator" not in all_text(approval_card(make_request(), make_quote(), now=NOW))


def test_card_summarises_the_workload_without_env_values_or_keys():
    msg = approval_card(make_request(), make_quote(), now=NOW)
    text = all_text(msg)
    assert "`HF_TOKEN`, `MALLOC_ARENA_MAX`" in text  # keys, sorted
    assert SECRET not in text and "MALLOC_ARENA_MAX=1" not in text
    assert SSH_KEY not in text and "AAAAC3" not in text
    assert "*SSH keys*\n1 key" in text
    assert "`vllm/vllm-openai:latest`" in text
    assert "8000/http, 22/tcp" in text
    assert "*Automatic recovery*\noff" in text


def test_no_ssh_key_is_called_out():
    req = make_request(workload=make_workload(ssh_keys=(), auto_recovery=True))
    text = all_text(approval_card(req, make_quote(), now=NOW))
    assert "none — nobody can log in" in text and "*Automatic recovery*\non" in text


def test_approve_and_reject_carry_what_was_shown():
    req, q = make_request(hourly_cents=6253), make_quote()
    msg = approval_card(req, q, now=NOW)
    approve, reject = button(msg, Action.APPROVE), button(msg, Action.REJECT)
    assert approve["style"] == "primary" and reject["style"] == "danger"
    for b in (approve, reject):
        ref = ApprovalRef.unpack(b["value"])
        assert (ref.request_id, ref.quote_id, ref.hourly_cents) == ("req_1", q.id, 6253)
    confirm = approve["confirm"]
    assert confirm["title"]["text"] == "Approve $62.53/h?"
    assert confirm["text"]["text"] == (
        "The whole cluster bills $62.53 per hour ($1,500.72 per day) from the moment it is "
        "ready until someone terminates it.")
    assert "$62.53/h" in reject["confirm"]["text"]["text"]
    assert reject["confirm"]["style"] == "danger"


def test_card_binds_the_request_rate_not_the_quote_rate():
    req, q = make_request(hourly_cents=7000), make_quote(hourly_cents=6253)
    msg = approval_card(req, q, now=NOW)
    assert ApprovalRef.unpack(button(msg, Action.APPROVE)["value"]).hourly_cents == 7000
    assert button(msg, Action.APPROVE)["confirm"]["title"]["text"] == "Approve $70.00/h?"


def test_price_change_lines():
    up = all_text(approval_card(make_request(previous_hourly_cents=6000), make_quote(), now=NOW))
    assert "The quote changed: was $60.00/h, now $62.53/h (+4.2%)" in up
    assert "approve again" in up
    same = all_text(approval_card(make_request(previous_hourly_cents=6253), make_quote(),
                                  now=NOW))
    assert "price unchanged at $62.53/h" in same
    first = all_text(approval_card(make_request(), make_quote(), now=NOW))
    assert "quote changed" not in first and "unchanged" not in first


def _outcome(status: RequestStatus, approvals: Sequence[Approval] = (),
             **changes: Any) -> Message:
    req = make_request(status=status, **changes)
    return approval_outcome(req, make_quote(), approvals, now=NOW)


@pytest.mark.parametrize("status", list(RequestStatus))
def test_outcome_never_has_approve_or_reject_and_uses_new_block_ids(status):
    card = approval_card(make_request(), make_quote(), now=NOW)
    msg = _outcome(status, last_error="capacity_unavailable")
    check_message(msg)
    ids = {b["action_id"] for b in buttons(msg)}
    assert Action.APPROVE not in ids and Action.REJECT not in ids
    old = {b["block_id"] for b in block_dicts(card)}
    assert old.isdisjoint(b["block_id"] for b in block_dicts(msg))
    assert SECRET not in all_text(msg)


@pytest.mark.parametrize("status", [RequestStatus.APPROVED, RequestStatus.LAUNCHING,
                                    RequestStatus.LAUNCHED])
def test_outcome_approved(status):
    text = all_text(_outcome(status, [make_approval()]))
    assert "Approved by <@U0BOB> at <!date^" in text


def test_outcome_approved_falls_back_to_the_request_decision():
    text = all_text(_outcome(RequestStatus.APPROVED, decided_by="U0CAROL", decided_at=NOW))
    assert "Approved by <@U0CAROL> at <!date^" in text


def test_outcome_rejected():
    text = all_text(_outcome(RequestStatus.REJECTED, [make_approval(Decision.REJECT)]))
    assert "Rejected by <@U0BOB> at <!date^" in text


def test_outcome_superseded():
    text = all_text(_outcome(RequestStatus.SUPERSEDED))
    assert ("Superseded: the quote expired or its price changed — a new approval card "
            "follows") in text


def test_outcome_launch_failed_offers_retry():
    msg = _outcome(RequestStatus.LAUNCH_FAILED, last_error="capacity_unavailable: 2 of 4 nodes")
    assert "capacity_unavailable: 2 of 4 nodes" in all_text(msg)
    retry = button(msg, Action.RETRY_LAUNCH)
    assert RequestRef.unpack(retry["value"]).request_id == "req_1"
    assert "$62.53" in retry["confirm"]["title"]["text"]
    assert [b["action_id"] for b in buttons(msg)] == [Action.RETRY_LAUNCH]


def test_outcome_failed_shows_the_reason_and_no_buttons():
    msg = _outcome(RequestStatus.FAILED, last_error="invalid_request: reserved_env NODE_RANK")
    assert "reserved_env NODE_RANK" in all_text(msg) and buttons(msg) == []


def test_outcome_note_is_appended_with_our_mentions_kept():
    msg = approval_outcome(make_request(status=RequestStatus.APPROVED), make_quote(),
                           [make_approval()], now=NOW,
                           note="Also pinged <@U0CAROL> <!channel>")
    text = all_text(msg)
    assert "Also pinged <@U0CAROL> &lt;!channel&gt;" in text


def test_hostile_and_huge_inputs_are_escaped_and_within_limits():
    workload = make_workload(
        name=HOSTILE * 2, image=HOSTILE * 5,
        docker_start_cmd=tuple(HOSTILE for _ in range(50)),
        env={f"{HOSTILE}{i}": SECRET for i in range(200)},
        ports=tuple(f"{HOSTILE}{i}" for i in range(100)),
        ssh_keys=tuple(SSH_KEY for _ in range(100)),
    )
    q = make_quote(accelerator_name=HOSTILE, location=HOSTILE, id="qte_" + "x" * 200)
    for status in RequestStatus:
        req = make_request(workload=workload, status=status, last_error=HOSTILE * 20,
                           id="req_" + "y" * 200, previous_hourly_cents=1)
        card = approval_card(req, q, now=NOW)
        outcome = approval_outcome(req, q, [], now=NOW, note=HOSTILE * 20)
        for msg in (card, outcome):
            check_message(msg)
            # The note is bot-written mrkdwn: it keeps <@U…> mentions by design.
            assert_escaped(msg, user_mentions_kept=msg is outcome)
            assert SECRET not in all_text(msg)
            assert "…and 180 more" in all_text(msg)
