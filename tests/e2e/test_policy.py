"""The spend policy at work over Slack: who may approve, how many, budgets, limits, overrides,
expiry, the spend envelope, the audit trail, the App Home, `/cluster spend` and `audit`."""

import asyncio
import copy
import json
from datetime import timedelta

import pytest
import yaml

from bot.domain.models import RequestStatus
from bot.slack.ids import Action
from tests.e2e.harness import ALICE, APPROVALS, BOB, CAROL, DAVE, LEADS, bot

BASE = {
    "approvals_channel": APPROVALS,
    "approvers": {"users": [BOB], "group": LEADS},  # carol approves through the group
    "admins": [DAVE],
    "approval": {"auto_approve_below": 10.0, "one_approver_up_to": 100.0},
    "budgets": {"default_user": 100000},
    "limits": {"accelerators": ["h100", "l40s"], "max_nodes": 4},
}


def policy(**changes):
    merged = json.loads(json.dumps(BASE))
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key].update(value)
        else:
            merged[key] = value
    return yaml.safe_dump(merged)


async def request_of(h):
    return (await h.requests_in_db())[-1]


def said(h, user, text):
    return any(text in h.text_of(m) for m in h.slack.ephemerals(user))


async def test_below_the_auto_threshold_launches_without_an_approver(tmp_path):
    async with bot(tmp_path, policy=policy()) as h:
        await h.request(quote_text="quote l40sx1 nodes=2")  # $3.03/h
        request = await request_of(h)
        assert request.status is RequestStatus.LAUNCHED and request.decided_by is None
        assert "Auto-approved" in h.text_of(h.cards()[-1])


async def test_one_approver_in_the_middle_band_and_a_group_member_counts(tmp_path):
    async with bot(tmp_path, policy=policy()) as h:
        card = await h.request(quote_text="quote h100x8 nodes=2")  # $62.43/h
        await h.click(card, Action.APPROVE, user=CAROL)  # via the S0LEADS group
        assert (await request_of(h)).status is RequestStatus.LAUNCHED


async def test_two_distinct_approvers_above_the_upper_band(tmp_path):
    async with bot(tmp_path, policy=policy()) as h:
        card = await h.request(quote_text="quote h100x8 nodes=4")  # $124.85/h
        assert (await request_of(h)).approvals_needed == 2
        await h.click(card, Action.APPROVE, user=BOB)
        assert (await request_of(h)).status is RequestStatus.PENDING
        assert "1 of 2" in h.text_of(h.cards()[-1])
        await h.click(h.cards()[-1], Action.APPROVE, user=BOB)  # the same approver again
        assert said(h, BOB, "needs another approver")
        assert h.sim.engine.list_clusters() == []
        await h.click(h.cards()[-1], Action.APPROVE, user=CAROL)
        request = await request_of(h)
        assert request.status is RequestStatus.LAUNCHED
        assert len(h.sim.engine.list_clusters()) == 1


async def test_two_approvers_clicking_at_once_launch_exactly_once(tmp_path, database_url):
    # Both approvals must count: each decision locks the request row (SELECT … FOR UPDATE on
    # PostgreSQL), so the second sees the first's approval instead of both seeing "1 of 2".
    async with bot(tmp_path, policy=policy(), database_url=database_url) as h:
        card = copy.deepcopy(await h.request(quote_text="quote h100x8 nodes=4"))  # $124.85/h
        replies = await asyncio.gather(*(h.requests.click(card, Action.APPROVE, user_id=user)
                                          for user in (BOB, CAROL)))
        await h.rt.settle()
        assert all(r.status == 200 for r in replies)
        request = await request_of(h)
        assert request.status is RequestStatus.LAUNCHED
        assert len(h.sim.engine.list_clusters()) == 1
        async with h.rt.db.transaction() as repos:
            assert len(await repos.approvals.for_request(request.id)) == 2


async def test_self_approval_and_non_approvers_are_refused(tmp_path):
    async with bot(tmp_path, policy=policy()) as h:
        card = await h.request(user=BOB, quote_text="quote h100x8 nodes=2")
        await h.click(card, Action.APPROVE, user=BOB)
        assert said(h, BOB, "own launch request")
        await h.click(card, Action.APPROVE, user=ALICE)
        assert said(h, ALICE, "Only the configured approvers")
        assert (await request_of(h)).status is RequestStatus.PENDING


@pytest.mark.parametrize(("text", "rule", "says"), [
    ("quote h100x8 nodes=2", {"budgets": {"users": {ALICE: 500}}},
     "of your $500.00 budget"),
    ("quote h100x8 nodes=2", {"budgets": {"teams": {"research": {
        "members": [ALICE, DAVE], "monthly": 300}}}}, "research"),
    ("quote b200x8 nodes=2", {}, "not allowed by the spend policy"),
    ("quote h100x8 nodes=6", {}, "nodes"),
])
async def test_a_broken_rule_is_refused_on_the_quote_card_before_any_form(
        tmp_path, text, rule, says):
    async with bot(tmp_path, policy=policy(**rule)) as h:
        await h.slash(text)
        card = h.last_ephemeral(ALICE, containing="would refuse this launch")
        shown = h.text_of(card)
        assert says in shown, shown  # the rule, with the numbers, on the card itself
        assert Action.QUOTE_REQUEST_LAUNCH not in shown  # no form to fill in for nothing
        assert Action.QUOTE_DISCARD in shown
        assert await h.requests_in_db() == [] and h.cards() == []


async def test_with_overrides_a_broken_rule_goes_to_an_admin(tmp_path):
    async with bot(tmp_path, policy=policy(budgets={"users": {ALICE: 500}},
                                           overrides="admins")) as h:
        card = await h.request(quote_text="quote h100x8 nodes=2")
        request = await request_of(h)
        assert request.override_rule and "budget" in request.override_rule
        assert "override" in h.text_of(card).lower()
        await h.click(card, Action.APPROVE, user=BOB)  # an approver, but not an admin
        assert said(h, BOB, "only a policy admin")
        await h.click(h.cards()[-1], Action.APPROVE, user=DAVE)
        assert (await request_of(h)).status is RequestStatus.LAUNCHED


async def test_envelope_warned_due_extended_as_the_one_rule_says(tmp_path):
    limits = {"accelerators": ["h100"], "max_nodes": 4, "max_lifetime_hours": 10}
    async with bot(tmp_path, policy=policy(limits=limits)) as h:
        cluster_id = await h.running_cluster()
        ready = h.sim.engine.get_cluster(cluster_id).ready_at

        async def at(hours):
            h.clock.set(ready + timedelta(hours=hours))
            await h.rt.services.watching.sync_live()
            await h.rt.services.envelopes.sweep()
            await h.rt.settle()

        await at(7.9)
        assert not [m for m in h.slack.dms(ALICE) if "80 %" in h.text_of(m)]
        await at(8)
        assert len([m for m in h.slack.dms(ALICE) if "80 %" in h.text_of(m)]) == 1
        await at(9)
        assert len([m for m in h.slack.dms(ALICE) if "80 %" in h.text_of(m)]) == 1
        await at(10)
        [due] = [m for m in h.slack.dms(BOB) if Action.EXTEND in h.text_of(m)]
        assert any(Action.EXTEND in h.text_of(m) for m in h.slack.dms(ALICE))
        # The owner asks: +10 h ≈ $624.30 is above the auto tier ($10/h × 10 h): a card.
        await h.click(due, Action.EXTEND, user=ALICE)
        assert not said(h, ALICE, "Owners can't extend")
        assert said(h, ALICE, "needs 1 approver")
        assert (await h.record(cluster_id)).lifetime_hours == 10
        await h.click(due, Action.EXTEND, user=BOB)  # the same offer: already asked
        assert said(h, BOB, f"Already asked by <@{ALICE}>")
        await h.click(h.cards()[-1], Action.EXTENSION_APPROVE, user=BOB)
        assert (await h.record(cluster_id)).lifetime_hours == 20
        await at(11)
        assert h.sim.engine.get_cluster(cluster_id).status.value == "running"  # not enforced
        await at(16)
        assert len([m for m in h.slack.dms(ALICE) if "80 %" in h.text_of(m)]) == 2


async def test_an_enforced_envelope_ends_in_termination_after_warnings(tmp_path):
    # Approved for 4 hours: AI Reserve charges hours 1-4 at readyAt + 0…3 h and hour 5 at
    # readyAt + 4 h. The bot warns an hour before (3 h) and terminates before hour 5 is charged,
    # a poll interval and the provider's allowance early (30 s + 3 min): 4 hours billed, not 5.
    limits = {"accelerators": ["h100"], "max_nodes": 4, "max_lifetime_hours": 4,
              "enforce_lifetime": True}
    async with bot(tmp_path, policy=policy(limits=limits)) as h:
        cluster_id = await h.running_cluster()
        ready = h.sim.engine.get_cluster(cluster_id).ready_at
        assert h.rt.services.envelopes.margin == timedelta(minutes=3, seconds=30)
        for minutes in (150, 180, 192, 230, 236, 240 - 3.5):
            h.clock.set(ready + timedelta(minutes=minutes))
            await h.rt.services.watching.sync_live()
            await h.rt.services.envelopes.sweep()
            await h.rt.settle()
            status = h.sim.engine.get_cluster(cluster_id).status.value
            assert (status == "running") == (minutes < 236.5), minutes
        dms = [h.text_of(m) for m in h.slack.dms(ALICE)]
        assert any("terminates in 56 min" in d and "before AI Reserve charges hour 5" in d
                   for d in dms), dms
        assert not any("80 %" in d for d in dms)  # the final warning (at 3 h) came first
        h.clock.set(ready + timedelta(hours=6))
        await h.rt.services.watching.sync_live()
        billed = h.sim.engine.get_cluster(cluster_id).billing
        assert billed.accrued_hours == 4
        async with h.rt.db.transaction() as repos:
            entries = await repos.audit.list(subject_id=cluster_id)
        assert any(e.action == "enforce_envelope" for e in entries)


async def test_without_enforcement_the_100_percent_prompt_comes_before_the_next_charge(tmp_path):
    limits = {"accelerators": ["h100"], "max_nodes": 4, "max_lifetime_hours": 2}
    async with bot(tmp_path, policy=policy(limits=limits)) as h:
        cluster_id = await h.running_cluster()
        ready = h.sim.engine.get_cluster(cluster_id).ready_at
        h.clock.set(ready + timedelta(hours=2) - h.rt.services.envelopes.margin)
        await h.rt.services.watching.sync_live()
        await h.rt.services.envelopes.sweep()
        await h.rt.settle()
        assert h.sim.engine.get_cluster(cluster_id).billing.accrued_hours == 2
        [due] = [m for m in h.slack.dms(BOB) if Action.EXTEND in h.text_of(m)]
        assert "AI Reserve charges hour 3 at" in h.text_of(due)
        assert "(in 3 min 30 s)" in h.text_of(due) or "(in 3 min" in h.text_of(due)


async def test_every_action_leaves_an_audit_row_refusals_included(tmp_path):
    async with bot(tmp_path, policy=policy()) as h:
        card = await h.request(quote_text="quote h100x8 nodes=2")
        await h.click(card, Action.APPROVE, user=ALICE)  # refused: own request
        await h.click(card, Action.APPROVE, user=BOB)
        cluster_id = (await request_of(h)).cluster_id
        await h.advance(60)
        await h.slash("autorecover clu_nope on", user=ALICE)  # refused: no such cluster
        await h.slash(f"autorecover {cluster_id} on", user=ALICE)
        await h.slash(f"notify {cluster_id} <#C0RANDOM|random>", user=ALICE)
        await h.click(await h.top(cluster_id), Action.TERMINATE, user=ALICE)
        await h.slash("audit", user=ALICE)  # refused: not an approver
        async with h.rt.db.transaction() as repos:
            entries = await repos.audit.list(limit=200)
        seen = {(e.action, e.outcome) for e in entries}
        for expected in [("request", "ok"), ("approve", "refused"), ("approve", "ok"),
                         ("launch", "ok"), ("autorecover", "refused"), ("autorecover", "ok"),
                         ("notify", "ok"), ("terminate", "ok"), ("read_audit", "refused")]:
            assert expected in seen, expected
        approve = next(e for e in entries if e.action == "approve" and e.outcome == "ok")
        assert approve.actor_id == BOB and approve.amount_cents == 6243
        assert approve.idempotency_key
        await h.slash(f"audit {cluster_id}", user=BOB)
        assert said(h, BOB, "terminate")


async def test_app_home_shows_clusters_pending_approvals_and_spend(tmp_path):
    async with bot(tmp_path, policy=policy()) as h:
        await h.requests.app_home_opened(ALICE)
        await h.rt.settle()
        assert "no live clusters" in json.dumps(h.slack.home(ALICE)).lower()
        await h.request(quote_text="quote h100x8 nodes=2")
        bob_home = json.dumps(h.slack.home(BOB))  # refreshed when the request arrived
        assert Action.APPROVE in bob_home
        await h.click(h.cards()[-1], Action.APPROVE, user=BOB)
        await h.advance(3600)
        await h.requests.app_home_opened(ALICE)
        await h.rt.settle()
        alice_home = json.dumps(h.slack.home(ALICE))
        assert Action.TERMINATE in alice_home
        assert "*$62.43* of your *$100,000.00* budget" in alice_home  # one billed hour


async def test_spend_report_for_the_month(tmp_path):
    async with bot(tmp_path, policy=policy()) as h:
        cluster_id = await h.running_cluster()
        await h.advance(2 * 3600)
        await h.slash("spend", user=DAVE)
        report = h.text_of(h.last_ephemeral(DAVE, containing=cluster_id))
        assert "$187.29" in report  # three billed hours of $62.43
        await h.slash("spend 2026-13", user=DAVE)
        assert said(h, DAVE, "YYYY-MM")
