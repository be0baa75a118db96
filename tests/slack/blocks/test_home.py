import json
from datetime import timedelta
from typing import Any

import pytest
from slack_sdk.models.views import View

from bot.domain.models import ClusterRecord, ClusterState, LaunchRequest, QuoteInfo
from bot.services.home import HomeFacts
from bot.slack.blocks.approval import approval_card
from bot.slack.blocks.home import home_payload, home_view, spend_bar
from bot.slack.ids import Action, ApprovalRef, ClusterRef
from tests.slack.blocks import *
from tests.slack.blocks import button as card_button


def _home(clusters: list[ClusterRecord] | None = None,
          pending: list[tuple[LaunchRequest, QuoteInfo]] | None = None, **changes: Any
          ) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "user_id": "U0BOB", "clusters": clusters or [], "pending": pending or [],
        "is_approver": True, "month_spent_cents": 1_700_000, "budget_cents": 4_000_000,
        "month": "2026-11", "now": NOW,
    }
    fields.update(changes)
    view = home_view(**fields)
    as_dict = _check(view)
    # What the publishers send: the very dict slack_sdk makes of the view, rendered once.
    facts = HomeFacts(**{name: value for name, value in fields.items() if name != "now"})
    assert home_payload(facts, now=fields["now"]) == as_dict
    return as_dict


def _check(view: View) -> dict[str, Any]:
    assert view.type == "home"
    view.validate_json()
    as_dict = view.to_dict()
    check_blocks(list(view.blocks), max_blocks=100)
    assert "submit" not in as_dict and "close" not in as_dict
    for text in _mrkdwn(as_dict):
        assert "<!channel>" not in text and "<script>" not in text and "<@U0EVIL>" not in text
    everything = "\n".join(strings(as_dict))
    assert SECRET not in everything and SSH_KEY not in everything and "ssh -p" not in everything
    return as_dict


def _mrkdwn(obj: Any) -> list[str]:
    if isinstance(obj, dict):
        found = [obj["text"]] if obj.get("type") == "mrkdwn" else []
        return found + [t for v in obj.values() for t in _mrkdwn(v)]
    if isinstance(obj, list):
        return [t for v in obj for t in _mrkdwn(v)]
    return []


def _text(view: dict[str, Any]) -> str:
    return "\n".join(strings(view))


def _buttons(view: dict[str, Any]) -> list[dict[str, Any]]:
    found = []
    for block in view["blocks"]:
        if block["type"] == "actions":
            found.extend(block["elements"])
        if block.get("accessory", {}).get("type") == "button":
            found.append(block["accessory"])
    return found


def test_empty_home_has_every_empty_state():
    view = _home(month_spent_cents=0)
    text = _text(view)
    assert "Your live clusters" in text and "You have no live clusters." in text
    assert "Waiting for your approval" in text and "Nothing is waiting for your approval." in text
    assert "Your spend this month" in text
    assert "*$0.00* of your *$40,000.00* budget in 2026-11\n`░░░░░░░░░░` 0 %" in text
    assert _buttons(view) == []


def test_one_cluster_and_one_request():
    c = make_cluster()
    req, q = make_request(), make_quote()
    view = _home([c], [(req, q)])
    text = _text(view)
    assert "Hello <@U0BOB>" in text
    assert "1 cluster · together *$62.53/h* ($1,500.72 per day)" in text
    assert "`clu_9xQe1` *dsv3-serve* · 2 × 8 NVIDIA H100 80GB SXM · us-tx" in text
    assert "Running since <!date^" in text
    assert "*$62.53/h* · $187.59 so far over 3 billed hours (AI Reserve's figures)" in text
    assert "<@U0ALICE> asks for *2 × 8 NVIDIA H100 80GB SXM* in us-tx at *$62.53/h*" in text
    assert "*$17,000.00* of your *$40,000.00* budget in 2026-11\n`▓▓▓▓░░░░░░` 42 %" in text
    terminate = [b for b in _buttons(view) if b["action_id"] == Action.TERMINATE]
    assert len(terminate) == 1
    assert ClusterRef.unpack(terminate[0]["value"]).cluster_id == c.id
    assert "$62.53 per hour" in terminate[0]["confirm"]["text"]["text"]
    # Approve / Reject exactly as on the approval card: same ids, values and confirms.
    card = approval_card(req, q, now=NOW)
    for action_id in (Action.APPROVE, Action.REJECT):
        [mine] = [b for b in _buttons(view) if b["action_id"] == action_id]
        theirs = card_button(card, action_id)
        assert mine == theirs
        ref = ApprovalRef.unpack(mine["value"])
        assert (ref.request_id, ref.quote_id, ref.hourly_cents) == ("req_1", q.id, 6253)


def test_not_an_approver_sees_no_pending_section():
    view = _home([make_cluster()], [(make_request(), make_quote())], is_approver=False)
    text = _text(view)
    assert "Waiting for your approval" not in text
    assert {b["action_id"] for b in _buttons(view)} == {Action.TERMINATE}


def test_policy_notes_on_pending_requests_and_override_confirm():
    req = make_request(lifetime_hours=72, approvals_needed=2,
                       override_rule="Team research: $151,000.00 of $150,000.00.")
    view = _home([], [(req, make_quote(expires_at=NOW - timedelta(seconds=1)))])
    text = _text(view)
    assert "Envelope 72 h ≈ $4,502.16: at its end the owner and approvers are asked" in text
    assert "Needs 2 approvers" in text
    assert "Breaks the spend policy: Team research: $151,000.00 of $150,000.00.*" in text
    assert "Quote expired <!date^" in text
    [approve] = [b for b in _buttons(view) if b["action_id"] == Action.APPROVE]
    assert approve["confirm"]["title"]["text"] == "Override and approve $62.53/h?"


def test_terminating_cluster_has_no_terminate_button():
    view = _home([make_cluster(status=ClusterState.TERMINATING)])
    assert _buttons(view) == [] and "Terminating" in _text(view)


@pytest.mark.parametrize(("n_clusters", "n_pending"), [(0, 0), (1, 1), (60, 60), (1000, 1000)])
def test_any_count_stays_within_100_blocks(n_clusters, n_pending):
    clusters = [make_cluster(**{**EXTREME_CLUSTER, "id": f"clu_{i}_{'ü' * 240}"},
                             owner_id="U0BOB", lifetime_hours=10**6, accrued_cents=10**12)
                for i in range(n_clusters)]
    workload = make_workload(name=HOSTILE, env={HOSTILE: SECRET})
    pending = [(make_request(id=f"req_{i}_{'y' * 240}", workload=workload,
                             override_rule=HOSTILE * 10, approvals_needed=2,
                             lifetime_hours=10**6),
                make_quote(id=f"qte_{i}", accelerator_name=HOSTILE, location=HOSTILE))
               for i in range(n_pending)]
    view = _home(clusters, pending, month_spent_cents=10**12, budget_cents=1)
    assert len(view["blocks"]) <= 100
    text = _text(view)
    if n_clusters > 20:
        assert f"…and {n_clusters - 20} more. `/cluster list` shows them all." in text
    if n_pending > 15:
        assert f"…and {n_pending - 15} more requests" in text
    assert ":warning: *Over budget by" in text and "`▓▓▓▓▓▓▓▓▓▓`" in text
    assert len(json.dumps(view).encode()) < 250_000  # views.publish: view_too_large above 250 kB


def test_no_budget():
    text = _text(_home(budget_cents=None))
    assert "*$17,000.00* spent in 2026-11 · no monthly budget applies to you." in text
    assert "▓" not in text and "░" not in text


@pytest.mark.parametrize(("spent", "budget", "bar", "pct"), [
    (0, 100, "░░░░░░░░░░", 0), (50, 100, "▓▓▓▓▓░░░░░", 50), (100, 100, "▓▓▓▓▓▓▓▓▓▓", 100),
    (250, 100, "▓▓▓▓▓▓▓▓▓▓", 250), (0, 0, "░░░░░░░░░░", 0), (1, 0, "▓▓▓▓▓▓▓▓▓▓", 100),
    (4, 1000, "░░░░░░░░░░", 0), (96, 100, "▓▓▓▓▓▓▓▓▓▓", 96),
])
def test_spend_bar(spent, budget, bar, pct):
    assert spend_bar(spent, budget) == (bar, pct)


def test_republishing_keeps_block_ids_and_changes_give_new_ones():
    a = _home([make_cluster()])
    b = _home([make_cluster()])
    c = _home([make_cluster(accrued_cents=1)])
    ids = [blk["block_id"] for blk in a["blocks"]]
    assert ids == [blk["block_id"] for blk in b["blocks"]]
    assert set(ids).isdisjoint(blk["block_id"] for blk in c["blocks"])


def test_together_on_home_counts_only_the_clusters_billing_now():
    billing = make_cluster()
    booting = make_cluster(id="clu_boot", status=ClusterState.PROVISIONING, ready_at=None)
    ending = make_cluster(id="clu_end", status=ClusterState.TERMINATING)
    text = _text(_home([billing, booting, ending]))
    assert ("3 clusters · together *$62.53/h* ($1,500.72 per day) for the 1 billing now · "
            "1 provisioning, 1 terminating (not billing)") in text
    idle = _text(_home([booting]))
    assert "1 cluster · none is billing now · 1 provisioning (not billing)" in idle
