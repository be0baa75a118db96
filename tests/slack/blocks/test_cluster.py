import json
import re
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest

from bot.domain.connection import ConnectionDetails, NodeConnection
from bot.domain.models import (
    Approval,
    ClusterRecord,
    ClusterState,
    Decision,
    NodeState,
    NodeSummary,
    Observation,
    RequestStatus,
)
from bot.slack.blocks.cluster import (
    cluster_status,
    connection_dm,
    request_progress,
    terminate_prompt,
)
from bot.slack.blocks.listing import cluster_list
from bot.slack.blocks.message import Message
from bot.slack.ids import Action, ClusterRef
from tests.slack.blocks import *

SSH = "ssh -p 22001 root@203.0.113.10"
DETAILS = ConnectionDetails(
    cluster_id="clu_9xQe1",
    primary_ssh_command=SSH,
    nodes=(NodeConnection(rank=0, ssh_command=SSH, interconnect_address="10.65.0.2"),
           NodeConnection(rank=1, ssh_command="ssh -p 22002 root@203.0.113.11",
                          interconnect_address="10.65.0.3")),
)
LIVE = (ClusterState.PROVISIONING, ClusterState.RUNNING, ClusterState.DEGRADED)


def _no_secrets(msg: Message) -> None:
    text = all_text(msg)
    assert "ssh -p" not in text and "203.0.113" not in text
    assert SECRET not in text and SSH_KEY not in text


def _progress(
    status: RequestStatus = RequestStatus.PENDING,
    cluster: ClusterRecord | None = None,
    approvals: Sequence[Approval] = (),
    **changes: Any,
) -> Message:
    req = make_request(status=status, **changes)
    msg = request_progress(req, make_quote(), cluster, now=NOW, approvals=approvals)
    check_message(msg)
    _no_secrets(msg)
    return msg


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (RequestStatus.PENDING, "Waiting for approval"),
        (RequestStatus.APPROVED, "Approved by <@U0BOB> at <!date^"),
        (RequestStatus.LAUNCHING, "— launching"),
        (RequestStatus.LAUNCH_FAILED, "kept: an approver or the requester can retry"),
        (RequestStatus.REJECTED, "Rejected* by <@U0BOB>"),
        (RequestStatus.SUPERSEDED, "the quote changed — waiting for a new approval"),
        (RequestStatus.FAILED, "Failed*: boom"),
        (RequestStatus.CANCELLED, "Cancelled"),
        (RequestStatus.WITHDRAWN, "Withdrawn by"),
    ],
)
def test_progress_before_a_cluster(status, expected):
    decision = Decision.REJECT if status is RequestStatus.REJECTED else Decision.APPROVE
    msg = _progress(status, approvals=[make_approval(decision)], last_error="boom")
    assert expected.lower() in all_text(msg).lower()
    # Only a pending request can be withdrawn (its requester's Withdraw, behind a confirm).
    assert [b["action_id"] for b in buttons(msg)] == (
        ["request_withdraw"] if status is RequestStatus.PENDING else [])
    assert "$62.53/h" in all_text(msg)


def test_progress_launch_failed_shows_reason():
    msg = _progress(RequestStatus.LAUNCH_FAILED, last_error="capacity_unavailable")
    assert ("Launch failed*: AI Reserve has no capacity to place every node right now"
            in all_text(msg))  # the provider's code in words


def test_progress_provisioning_counts_ready_nodes_and_offers_terminate():
    cluster = make_cluster(status=ClusterState.PROVISIONING, nodes_ready=1, ready_at=None)
    msg = _progress(RequestStatus.LAUNCHED, cluster)
    assert "Provisioning — nodes ready 1/2" in all_text(msg)
    assert ClusterRef.unpack(button(msg, Action.TERMINATE)["value"]).cluster_id == "clu_9xQe1"


def test_progress_running_states_the_locked_rate_and_the_readiness_caveat():
    msg = _progress(RequestStatus.LAUNCHED, make_cluster(connection_sent_at=NOW))
    text = all_text(msg)
    assert "Running since <!date^" in text and "at $62.53/h (locked)" in text
    assert "infrastructure readiness, not your app's health" in text
    assert "Connection details were sent to <@U0ALICE> by DM" in text
    terminate = button(msg, Action.TERMINATE)
    assert terminate["style"] == "danger"
    assert "$62.53 per hour" in terminate["confirm"]["text"]["text"]


def test_progress_degraded_keeps_billing():
    cluster = make_cluster(status=ClusterState.DEGRADED, last_error="node_unhealthy",
                           observed=_observed(used=1))
    msg = _progress(RequestStatus.LAUNCHED, cluster)
    text = all_text(msg)
    assert "keeps billing the full $62.53/h until someone acts" in text
    assert "node_unhealthy" not in text and "Automatic recovery is off" in text
    assert "`/cluster recover clu_9xQe1` makes one attempt now (2 of 3 attempts left" in text
    button(msg, Action.TERMINATE)


def test_progress_exhausted_offers_terminate_only_and_says_why():
    """The provider's contract: once every attempt is spent the cluster stays degraded and
    terminate is the way out — the message must not also offer `/cluster recover`."""
    cluster = make_cluster(status=ClusterState.DEGRADED, last_error="recovery_exhausted",
                           observed=_observed(used=3, state="exhausted"))
    msg = _progress(RequestStatus.LAUNCHED, cluster)
    text = all_text(msg)
    assert "recovery is exhausted" in text and "Every recovery attempt of this episode is " \
        "spent (3 of 3)" in text
    assert "Terminate is the way out: `/cluster terminate clu_9xQe1`" in text
    assert "/cluster recover" not in text and "makes one attempt" not in text
    assert "recovery_exhausted" not in text
    assert [b["action_id"] for b in buttons(msg)] == [Action.TERMINATE]


def _observed(*, used: int, state: str = "idle", auto: bool = False) -> Observation:
    return Observation(status=ClusterState.DEGRADED, episode=1, episode_started_at=NOW,
                       attempts_used=used, attempts_max=3, recovery_state=state,
                       auto_recovery=auto, skipped=(1,) if used else (),
                       nodes=(NodeState(rank=0, status="running"),
                              NodeState(rank=1, status="unhealthy")))


@pytest.mark.parametrize("state", [ClusterState.TERMINATING, ClusterState.TERMINATED,
                                   ClusterState.FAILED])
def test_progress_no_terminate_once_it_is_ending(state):
    msg = _progress(RequestStatus.LAUNCHED, make_cluster(status=state, terminated_at=NOW))
    assert buttons(msg) == []


def test_progress_terminated_reports_cost_and_the_surviving_volume():
    cluster = make_cluster(status=ClusterState.TERMINATED, terminated_at=NOW,
                           termination_reason="payment_grace_expired")
    text = all_text(_progress(RequestStatus.LAUNCHED, cluster))
    assert "Terminated at <!date^" in text and "after 2 h 10 min" in text
    assert "Cost: $187.59 over 3 billed hours (AI Reserve's figures)" in text
    assert "payment_grace_expired" not in text
    assert "Why: the payment grace ended on an unpaid hour" in text
    assert "Volume `vol_3kP0` survives the cluster and keeps billing until it is deleted" in text


def test_progress_terminated_existing_volume_is_not_warned_about():
    cluster = make_cluster(status=ClusterState.TERMINATED, terminated_at=NOW,
                           volume_created_with_cluster=False)
    assert "survives the cluster" not in all_text(_progress(RequestStatus.LAUNCHED, cluster))


def test_progress_failed_cluster_shows_the_error():
    cluster = make_cluster(status=ClusterState.FAILED, last_error="placement_failed")
    assert "Cluster failed*: placement failed" in all_text(_progress(RequestStatus.LAUNCHED,
                                                                     cluster))


def test_progress_edits_get_new_block_ids():
    pending = _progress(RequestStatus.PENDING)
    running = _progress(RequestStatus.LAUNCHED, make_cluster())
    assert {b["block_id"] for b in block_dicts(pending)}.isdisjoint(
        b["block_id"] for b in block_dicts(running))


def test_connection_dm_has_every_ssh_command_and_address_and_the_rate():
    msg = connection_dm(make_cluster(), DETAILS)
    text = checked_text(msg)
    assert f"```{SSH}```" in text
    assert "rank 0: `ssh -p 22001 root@203.0.113.10` · interconnect `10.65.0.2`" in text
    assert "rank 1: `ssh -p 22002 root@203.0.113.11` · interconnect `10.65.0.3`" in text
    assert "bills $62.53/h" in text and "/cluster terminate clu_9xQe1" in text


def test_connection_dm_with_many_nodes_and_hostile_strings():
    details = ConnectionDetails(
        cluster_id="clu_1", primary_ssh_command=HOSTILE * 10,
        nodes=tuple(NodeConnection(rank=i, ssh_command=HOSTILE, interconnect_address=HOSTILE)
                    for i in range(40)))
    msg = connection_dm(make_cluster(name=HOSTILE), details)
    check_message(msg)
    assert_escaped(msg)
    text = all_text(msg)
    more = re.search(r"…and (\d+) more nodes", text)
    assert more is not None
    assert text.count("• rank ") + int(more.group(1)) == 40


def test_list_shows_each_cluster():
    clusters = [make_cluster(), make_cluster(id="clu_2", name=None, owner_id="U0BOB",
                                             status=ClusterState.PROVISIONING)]
    msg = cluster_list(clusters, now=NOW)
    text = checked_text(msg)
    assert ("• `clu_9xQe1` *dsv3-serve* · 2 × 8 NVIDIA H100 80GB SXM · running · $62.53/h · "
            "2 h 20 min · <@U0ALICE>") in text
    assert "`clu_2` · 2 × 8" in text and "provisioning" in text and "<@U0BOB>" in text
    # Together counts only what bills now: the provisioning cluster is not charged yet.
    assert ("2 clusters · together *$62.53/h* ($1,500.72 per day) for the 1 billing now · "
            "1 provisioning (not billing)") in text
    assert "$125.06" not in text
    assert "more" not in text


def test_list_empty():
    msg = cluster_list([], now=NOW)
    check_message(msg)
    assert "No live clusters" in all_text(msg)


def test_list_of_60_hostile_clusters_stays_within_limits():
    clusters = [make_cluster(id=f"clu_{i:03d}", name=HOSTILE + "n" * 255, location=HOSTILE,
                             accelerator_name=HOSTILE) for i in range(60)]
    msg = cluster_list(clusters, now=NOW)
    blocks = check_message(msg)
    assert_escaped(msg)
    assert len(blocks) < 50 and len(json.dumps(msg.as_kwargs())) < 13_000
    shown = sum(all_text(msg).count(f"`clu_{i:03d}`") for i in range(60))
    assert 0 < shown < 60
    assert f"…and {60 - shown} more" in all_text(msg)


def test_list_of_many_plain_clusters_summarises_the_overflow():
    clusters = [make_cluster(id=f"c{i}") for i in range(500)]
    msg = cluster_list(clusters, now=NOW)
    check_message(msg)
    assert "more" in all_text(msg)


def test_status_shows_everything_but_ssh():
    nodes = [NodeSummary(rank=0, role="primary", status="running", gpus=8,
                         interconnect_address="10.65.0.2"),
             NodeSummary(rank=1, role="worker", status="unhealthy", gpus=8,
                         last_error="nvidia-smi failed")]
    msg = cluster_status(make_cluster(), now=NOW, nodes=nodes)
    check_message(msg)
    _no_secrets(msg)
    text = all_text(msg)
    for expected in ("Running since", "*Shape*\n2 × 8 NVIDIA H100 80GB SXM", "*Location*\nus-tx",
                     "*Locked rate*\n$62.53/h ($1,500.72 per day)", "*Ready since*\n<!date^",
                     "*Accrued so far*\n$187.59 over 3 billed hours", "*Owner*\n<@U0ALICE>",
                     "`vol_3kP0` (created with the cluster", "rank 0 · primary · *running*",
                     "rank 1 · worker · *unhealthy* · 8 GPUs — nvidia-smi failed"):
        assert expected in text
    button(msg, Action.TERMINATE)


@pytest.mark.parametrize("state", list(ClusterState))
def test_status_terminate_only_while_it_bills(state):
    msg = cluster_status(make_cluster(status=state, terminated_at=NOW), now=NOW)
    check_message(msg)
    has_button = bool(buttons(msg))
    assert has_button == (state in LIVE)


def test_status_with_hostile_strings():
    nodes = [NodeSummary(rank=i, role=HOSTILE, status=HOSTILE, gpus=8, last_error=HOSTILE * 5)
             for i in range(30)]
    cluster = make_cluster(name=HOSTILE * 3, location=HOSTILE, accelerator_name=HOSTILE,
                           status=ClusterState.DEGRADED, last_error=HOSTILE * 10,
                           volume_id=HOSTILE)
    msg = cluster_status(cluster, now=NOW, nodes=nodes)
    check_message(msg)
    assert_escaped(msg)


def test_terminate_prompt_confirms_with_the_rate():
    msg = terminate_prompt(make_cluster())
    check_message(msg)
    terminate = button(msg, Action.TERMINATE)
    assert ClusterRef.unpack(terminate["value"]).cluster_id == "clu_9xQe1"
    confirm = terminate["confirm"]
    assert confirm["style"] == "danger"
    assert "$62.53 per hour" in confirm["text"]["text"]
    assert "cannot be undone" in confirm["text"]["text"]
    assert "`vol_3kP0` is kept" in all_text(msg)


def test_terminate_prompt_for_an_ended_cluster_has_no_button():
    msg = terminate_prompt(make_cluster(status=ClusterState.TERMINATED,
                                        terminated_at=NOW - timedelta(hours=1)))
    check_message(msg)
    assert buttons(msg) == []


def test_terminate_prompt_with_a_long_id_stays_within_confirm_limits():
    msg = terminate_prompt(make_cluster(id="c" * 250, name=HOSTILE))
    check_message(msg)
    assert_escaped(msg)


def test_terminate_confirm_states_the_rate_even_with_a_long_id():
    msg = terminate_prompt(make_cluster(**EXTREME_CLUSTER))
    check_message(msg)
    assert_escaped(msg)
    assert_confirms_state(msg, "$62.53 per hour")


def test_progress_degraded_points_at_recover_when_auto_recovery_is_off():
    cluster = make_cluster(status=ClusterState.DEGRADED)
    assert "`/cluster recover clu_9xQe1` makes one attempt now" in all_text(
        _progress(RequestStatus.LAUNCHED, cluster))
    cluster = make_cluster(status=ClusterState.DEGRADED, auto_recovery=True)
    assert "Automatic recovery is on" in all_text(_progress(RequestStatus.LAUNCHED, cluster))


def test_list_shows_unclaimed_adopted_clusters():
    clusters = [make_cluster(owner_id=None, adopted=True, request_id=None),
                make_cluster(id="clu_2", owner_id="U0BOB", adopted=True)]
    msg = cluster_list(clusters, now=NOW)
    text = checked_text(msg)
    assert "· 2 h 20 min · unclaimed (adopted)" in text
    assert "· <@U0BOB> (adopted)" in text


def test_status_shows_auto_recovery_and_extra_channels():
    msg = cluster_status(make_cluster(auto_recovery=True, notify_channels=("C0OPS", "C0ML")),
                         now=NOW)
    text = checked_text(msg)
    assert "*Auto-recovery*\non" in text
    assert "*Also notified*\n<#C0OPS>, <#C0ML>" in text
    assert "unclaimed" not in text.lower()


def test_status_without_extra_channels_has_no_such_field():
    text = all_text(cluster_status(make_cluster(), now=NOW))
    assert "*Auto-recovery*\noff" in text and "Also notified" not in text


def test_status_of_an_unclaimed_adopted_cluster():
    msg = cluster_status(make_cluster(owner_id=None, adopted=True, request_id=None), now=NOW)
    text = checked_text(msg)
    assert "*Owner*\nunclaimed" in text
    assert "Found at AI Reserve, not launched through the bot" in text
    assert "reminded to the approvers until someone claims it" in text
    assert "Connection details" not in text
    button(msg, Action.TERMINATE)


def test_status_of_a_claimed_adopted_cluster():
    text = all_text(cluster_status(make_cluster(owner_id="U0BOB", adopted=True), now=NOW))
    assert "*Owner*\n<@U0BOB>" in text and "Adopted: Found at AI Reserve" in text


def test_status_with_extreme_input_and_many_channels():
    cluster = make_cluster(**EXTREME_CLUSTER, owner_id=None, adopted=True,
                           notify_channels=tuple(f"C{i:010d}" for i in range(300)))
    msg = cluster_status(cluster, now=NOW)
    check_message(msg)
    assert_escaped(msg)
    assert_confirms_state(msg, "$62.53 per hour")


def test_together_is_zero_while_nothing_bills():
    clusters = [make_cluster(status=ClusterState.PROVISIONING, ready_at=None),
                make_cluster(id="clu_2", status=ClusterState.TERMINATING)]
    text = all_text(cluster_list(clusters, now=NOW))
    assert "2 clusters · none is billing now · 1 provisioning, 1 terminating (not billing)" in text
    assert "$62.53/h*" not in text.split("\n")[0]


def test_terminate_prompt_says_the_hour_is_paid_and_what_terminating_saves():
    from datetime import timedelta

    from bot.slack.blocks.cluster import terminate_prompt
    ready = NOW - timedelta(hours=2, minutes=20)
    c = make_cluster(ready_at=ready, accrued_hours=3, accrued_cents=3 * 6253)
    text = all_text(terminate_prompt(c, now=NOW))
    paid_until = int((ready + timedelta(hours=3)).timestamp())
    assert "The hour in progress is already paid ($62.53, charged in full when it began" in text
    assert f"runs until <!date^{paid_until}^" in text
    assert "Terminating now saves the next charge of $62.53 at" in text
    assert "($1,500.72 per day)" in text
    confirm_text = json.dumps(button(terminate_prompt(c, now=NOW), Action.TERMINATE)["confirm"])
    assert "The current hour is already paid" in confirm_text
    assert f":{ready:%M} past each hour" in confirm_text
    assert "terminating now saves $62.53 for every further hour" in confirm_text
    provisioning = make_cluster(status=ClusterState.PROVISIONING, ready_at=None)
    assert "free to terminate until it is ready" in all_text(terminate_prompt(provisioning,
                                                                               now=NOW))
    ended = make_cluster(status=ClusterState.TERMINATED)
    assert "terminating costs nothing more" in all_text(terminate_prompt(ended, now=NOW))


def test_status_shows_the_recovery_episode_attempts_and_each_node():
    nodes = [NodeSummary(rank=0, role="primary", status="running", gpus=8),
             NodeSummary(rank=1, role="worker", status="unhealthy", gpus=8,
                         last_error="provider_unrecoverable")]
    cluster = make_cluster(status=ClusterState.DEGRADED, observed=_observed(used=2))
    msg = cluster_status(cluster, now=NOW, nodes=nodes)
    text = checked_text(msg)
    assert "*Recovery*\nEpisode 1 since <!date^" in text
    assert "*2 of 3 attempts used*" in text and "1 attempt left" in text
    assert "rank 0 · primary · *running*" in text and "rank 1 · worker · *unhealthy*" in text
    assert "could not bring back rank 1" in text
    assert "makes one attempt now (1 of 3 attempts left" in text


def test_status_once_exhausted_offers_terminate_only():
    cluster = make_cluster(status=ClusterState.DEGRADED, last_error="recovery_exhausted",
                           auto_recovery=True,
                           observed=_observed(used=3, state="exhausted", auto=True))
    msg = cluster_status(cluster, now=NOW)
    text = checked_text(msg)
    assert "*3 of 3 attempts used*" in text and "*Exhausted*" in text
    assert "recovery is exhausted" in text and "terminate is the way out" in text.lower()
    assert "*Auto-recovery*\non (no attempts left)" in text
    # Neither a recover command nor "lost nodes are restarted" once AI Reserve makes no more.
    assert "/cluster recover" not in text and "are restarted" not in text
    assert [b["action_id"] for b in buttons(msg)] == [Action.TERMINATE]


def test_status_without_any_episode_has_no_recovery_section():
    assert "*Recovery*" not in all_text(cluster_status(make_cluster(), now=NOW))


def test_terminate_prompt_does_not_call_an_uncharged_hour_paid():
    """Every node was down at the last mark: AI Reserve did not charge it, so the prompt must
    not say the hour in progress is already paid ($62.53)."""
    from bot.domain.models import Observation
    ready = NOW - timedelta(hours=2, minutes=10)
    down = make_cluster(status=ClusterState.DEGRADED, accrued_hours=2, accrued_cents=2 * 6253,
                        observed=Observation(status=ClusterState.DEGRADED,
                                             skipped_marks=(ready + timedelta(hours=2),)))
    msg = terminate_prompt(down, now=NOW)
    text = msg.blocks[0].to_dict()["text"]["text"]  # the prompt (its confirm is static)
    assert "already paid" not in text
    assert "was *not charged*: every node was down" in text
    paid = all_text(terminate_prompt(make_cluster(), now=NOW))
    assert "The hour in progress is already paid ($62.53" in paid
