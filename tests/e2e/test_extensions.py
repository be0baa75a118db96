"""Issue 16, item 1: extending an envelope is spending, judged like a launch — the one rule of
bot/domain/extension.py — over Slack, against the simulator.

The policy: auto-approve below $10/h, one approver up to $100/h, a lifetime of 8 h. So the tiers
for an added amount are $80 (auto below) and $800 (two approvers above). The cluster is a planned
h100x8 nodes=2 run of 4 h at $62.43/h, approved by Bob.
"""

import asyncio
import copy
import json

import yaml

from bot.domain.extension import ExtensionStatus
from bot.slack.ids import Action
from tests.e2e.harness import ALICE, APPROVALS, BOB, CAROL, DAVE, LEADS, bot
from tests.e2e.test_thread import thread_lines

MALLORY = DAVE  # neither the owner nor an approver (no admins in this policy)


def policy(*, budget: int = 100000, **limits) -> str:
    return yaml.safe_dump({
        "approvals_channel": APPROVALS,
        "approvers": {"users": [BOB], "group": LEADS},  # carol approves through the group
        "approval": {"auto_approve_below": 10.0, "one_approver_up_to": 100.0},
        "budgets": {"default_user": budget},
        "limits": {"max_lifetime_hours": 8, **limits},
    })


def words(message) -> str:
    return message.text + json.dumps(message.blocks, ensure_ascii=False)


async def planned(h, hours: int = 4, who: str = ALICE) -> str:
    card = await h.request(user=who, quote_text=f"quote h100x8 nodes=2 hours={hours}")
    await h.click(card, Action.APPROVE, user=BOB)
    cluster_id = (await h.requests_in_db())[-1].cluster_id
    assert cluster_id is not None
    await h.advance(60)
    return cluster_id


async def ask(h, cluster_id: str, hours: int | str, *, user: str = ALICE):
    """`/cluster extend`: the private preview (nothing changes until its Confirm)."""
    before = len(h.slack.ephemerals(user))
    await h.slash(f"extend {cluster_id} {hours}", user=user)
    return h.slack.ephemerals(user)[before:][-1]


async def extensions(h):
    async with h.rt.db.transaction() as repos:
        return await repos.extensions.list_all()


async def audit_of(h, action: str, outcome: str = "ok"):
    async with h.rt.db.transaction() as repos:
        return [e for e in await repos.audit.list(limit=500)
                if e.action == action and e.outcome == outcome]


def extension_cards(h):
    return [m for m in h.cards() if "extension_approve" in words(m) or "asks to extend" in
            words(m)]


async def test_under_the_auto_tier_the_owner_confirms_and_it_applies_at_once(tmp_path):
    async with bot(tmp_path, policy=policy()) as h:
        cluster_id = await planned(h)
        preview = await ask(h, cluster_id, 1)
        said = words(preview)
        assert "+1 h ≈ $62.43" in said and "becomes 5 h ≈ $312.15" in said, said
        assert "applies at once" in said
        assert (await h.record(cluster_id)).lifetime_hours == 4  # a preview changes nothing
        await h.click(preview, Action.EXTEND, user=ALICE)
        record = await h.record(cluster_id)
        assert (record.lifetime_hours, record.extended_by) == (5, ALICE)
        [row] = await audit_of(h, "extend")
        assert row.amount_cents == 62_43  # the dollars added, not the hourly rate
        assert "+1 h" in row.detail and "4 h → 5 h" in row.detail and "$312.15" in row.detail
        assert "auto-approved" in row.detail
        assert len(await h.notices(cluster_id, "extended the envelope")) == 1
        assert extension_cards(h) == []


async def test_above_the_auto_tier_a_card_needs_an_approver_never_the_owner(tmp_path):
    async with bot(tmp_path, policy=policy()) as h:
        cluster_id = await planned(h)
        preview = await ask(h, cluster_id, 3)  # +$187.29 ≥ $80: one approver
        assert "needs an approver" in words(preview)
        await h.click(preview, Action.EXTEND, user=ALICE)
        assert "nothing is extended until it is approved" in words(h.slack.ephemerals(ALICE)[-1])
        assert (await h.record(cluster_id)).lifetime_hours == 4
        [card] = extension_cards(h)
        text = words(card)
        assert "*3 h ≈ $187.29*" in text and "*7 h ≈ $437.01* in all" in text, text
        await h.click(card, Action.EXTENSION_APPROVE, user=ALICE)
        assert "can't approve extending your own cluster" in words(h.slack.ephemerals(ALICE)[-1])
        await h.click(card, Action.EXTENSION_APPROVE, user=MALLORY)
        assert "Only the configured approvers" in words(h.slack.ephemerals(MALLORY)[-1])
        assert (await h.record(cluster_id)).lifetime_hours == 4
        # Two approvers press at once, each twice: exactly one extension.
        frozen = copy.deepcopy(card)
        await asyncio.gather(*(h.requests.click(frozen, Action.EXTENSION_APPROVE, user_id=who)
                               for who in (BOB, CAROL, BOB, CAROL)))
        await h.rt.settle()
        assert (await h.record(cluster_id)).lifetime_hours == 7
        [ext] = await extensions(h)
        assert ext.status is ExtensionStatus.APPLIED and len(ext.approved_by) == 1
        assert len(await audit_of(h, "extend")) == 1
        assert "Approved by" in words(extension_cards(h)[-1])
        assert "extension_approve" not in words(extension_cards(h)[-1])  # no more buttons


async def test_an_approver_asking_counts_once_and_two_approvers_are_needed_above_the_tier(
        tmp_path):
    # The case, scaled: Bob asks for far more than a one-approver launch may spend.
    async with bot(tmp_path, policy=policy()) as h:
        cluster_id = await planned(h)
        preview = await ask(h, cluster_id, 14, user=BOB)  # +$874.02 > $800: two approvers
        assert "needs two approvers (yours counts as the first)" in words(preview)
        await h.click(preview, Action.EXTEND, user=BOB)
        assert (await h.record(cluster_id)).lifetime_hours == 4  # not by Bob alone
        [card] = extension_cards(h)
        assert "1 of 2" in words(card)
        await h.click(card, Action.EXTENSION_APPROVE, user=BOB)
        assert "already approved" in words(h.slack.ephemerals(BOB)[-1])
        assert (await h.record(cluster_id)).lifetime_hours == 4
        await h.click(card, Action.EXTENSION_APPROVE, user=CAROL)
        record = await h.record(cluster_id)
        assert record.lifetime_hours == 18
        [row] = await audit_of(h, "extend")
        assert row.amount_cents == 874_02 and "4 h → 18 h" in row.detail
        assert f"<@{BOB}> and <@{CAROL}>" in row.detail
        [carols] = await audit_of(h, "approve_extension")
        assert carols.actor_id == CAROL and carols.amount_cents == 874_02
        assert "2 of 2 approvals for +14 h ≈ $874.02, envelope 4 h → 18 h" in carols.detail


async def test_a_rejected_extension_changes_nothing_and_its_row_carries_the_money(tmp_path):
    async with bot(tmp_path, policy=policy()) as h:
        cluster_id = await planned(h)
        await h.click(await ask(h, cluster_id, 3), Action.EXTEND, user=ALICE)
        [card] = extension_cards(h)
        await h.click(card, Action.EXTENSION_REJECT, user=MALLORY)
        assert "Only an approver" in words(h.slack.ephemerals(MALLORY)[-1])
        await h.click(card, Action.EXTENSION_REJECT, user=BOB)
        assert (await h.record(cluster_id)).lifetime_hours == 4
        [row] = await audit_of(h, "reject_extension")
        assert row.amount_cents == 187_29 and "+3 h ≈ $187.29, envelope 4 h → 7 h" in row.detail
        assert "Rejected by" in words(extension_cards(h)[-1])
        assert any("rejected extending" in words(m) for m in h.slack.dms(ALICE))


async def test_a_budget_refuses_an_extension_by_name_when_asked_and_when_approved(tmp_path):
    # 14 accruals are left in November: a 4 h run ($249.72) + 5 h more ($312.15) > $500.
    async with bot(tmp_path, policy=policy(budget=550)) as h:
        cluster_id = await planned(h)
        refused = words(await ask(h, cluster_id, 5))
        assert "of your $550.00 budget" in refused and "$312.15 for this one" in refused, refused
        # Fits when asked (+3 h: $437.01) …
        preview = await ask(h, cluster_id, 3)
        await h.click(preview, Action.EXTEND, user=ALICE)
        [card] = extension_cards(h)
        # … but another run approved meanwhile holds the room ($124.86): judged again, locked.
        await planned(h, hours=2)
        await h.click(card, Action.EXTENSION_APPROVE, user=BOB)
        assert "Not extended: the spend policy refuses it now" in words(
            h.slack.ephemerals(BOB)[-1])
        assert (await h.record(cluster_id)).lifetime_hours == 4
        [ext] = await extensions(h)
        assert ext.status is ExtensionStatus.REFUSED
        assert any("was not applied" in words(m) for m in h.slack.dms(ALICE))
        assert "refused it when it was approved" in words(extension_cards(h)[-1])


async def test_beyond_the_lifetime_even_a_cheap_extension_needs_an_approver(tmp_path):
    async with bot(tmp_path, policy=policy()) as h:
        card = await h.request(quote_text="quote l40sx1 nodes=2 hours=8")  # $3.03/h: auto
        cluster_id = (await h.requests_in_db())[-1].cluster_id
        assert card is not None and cluster_id is not None
        await h.advance(60)
        preview = await ask(h, cluster_id, 1)  # $3.03, but 9 h > the policy's 8
        assert "needs an approver" in words(preview)


async def test_bad_extend_input_is_named_privately_and_changes_nothing(tmp_path):
    async with bot(tmp_path, policy=policy()) as h:
        cluster_id = await planned(h)
        for bad, named in (("0", "`0` adds nothing"), ("-3", "`-3` is negative"),
                           ("1.5", "`1.5` is not a whole number of hours"),
                           ("100000", "`100000` hours is more than ten years"),
                           ("87601", "`87601` hours is more than ten years"),
                           ("abc", "`abc` is not a number of hours")):
            said = words(await ask(h, cluster_id, bad))
            assert named in said, said
        said = words(await ask(h, "clu_nope", 2))
        assert "I don't know a cluster `clu_nope`" in said
        said = words(await ask(h, cluster_id, 2, user=MALLORY))
        assert f"Only the owner (<@{ALICE}>) or an approver can extend `{cluster_id}`" in said
        assert (await h.record(cluster_id)).lifetime_hours == 4
        assert await extensions(h) == []
        assert await audit_of(h, "extend") == []


async def test_the_owner_pressing_extend_is_never_told_owners_cannot(tmp_path):
    async with bot(tmp_path, policy=policy()) as h:
        cluster_id = await planned(h)
        dm = [m for m in h.slack.dms(ALICE) if "hours=" in words(m) or "envelope" in words(m)]
        ready = h.sim.engine.get_cluster(cluster_id).ready_at
        from datetime import timedelta
        h.clock.set(ready + timedelta(hours=3, minutes=5))
        await h.rt.services.watching.sync_live()
        await h.rt.services.envelopes.sweep()
        await h.rt.settle()
        dm = [m for m in h.slack.dms(ALICE) if Action.EXTEND in words(m)][-1]
        text = words(dm)
        assert "its owner or an approver" in text
        assert "Owners can't" not in text and "its owner can move" not in text
        await h.click(dm, Action.EXTEND, user=ALICE)  # +8 h ($499.44): one approver
        assert "Owners can't" not in words(h.slack.ephemerals(ALICE)[-1])
        [card] = extension_cards(h)
        assert "*8 h ≈ $499.44*" in words(card)


async def test_the_quote_and_the_approval_card_say_how_the_envelope_ends(tmp_path):
    async with bot(tmp_path, policy=policy()) as h:
        quote = words(await h.quote("quote h100x8 nodes=2"))
        assert "Envelope 8 h ≈ $499.44, not a cap" in quote, quote
        card = words(await h.request(quote_text="quote h100x8 nodes=2"))
        assert "Envelope 8 h ≈ $499.44, not a cap" in card and "up to" not in card
        planned_quote = words(await h.quote("quote h100x8 nodes=2 hours=4"))
        assert "Envelope 4 h ≈ $249.72, enforced" in planned_quote


async def test_a_card_for_an_envelope_that_moved_says_so_and_cannot_apply(tmp_path):
    async with bot(tmp_path, policy=policy()) as h:
        cluster_id = await planned(h)
        for hours in (2, 3):
            await h.click(await ask(h, cluster_id, hours), Action.EXTEND, user=ALICE)
        first, second = (copy.deepcopy(m) for m in extension_cards(h))  # +2 h, then +3 h
        await h.click(first, Action.EXTENSION_APPROVE, user=BOB)
        assert (await h.record(cluster_id)).lifetime_hours == 6
        shown = words(extension_cards(h)[1])
        assert "Not extended: Already extended by" in shown, shown
        assert "extension_approve" not in shown
        await h.click(second, Action.EXTENSION_APPROVE, user=CAROL)  # an old copy
        assert (await h.record(cluster_id)).lifetime_hours == 6
        assert {e.hours: e.status for e in await extensions(h)} == {
            2: ExtensionStatus.APPLIED, 3: ExtensionStatus.STALE}


async def test_the_cluster_thread_tells_each_step_of_an_extension_once(tmp_path):
    async with bot(tmp_path, policy=policy()) as h:
        cluster_id = await planned(h)
        request_id = (await h.requests_in_db())[-1].id
        await h.click(await ask(h, cluster_id, 14, user=BOB), Action.EXTEND, user=BOB)
        [card] = extension_cards(h)
        await h.click(card, Action.EXTENSION_APPROVE, user=CAROL)
        await h.click(await ask(h, cluster_id, 3), Action.EXTEND, user=ALICE)
        await h.click(extension_cards(h)[-1], Action.EXTENSION_REJECT, user=BOB)
        lines = await thread_lines(h, request_id)
        told = [line for line in lines if "14 h" in line or "3 h" in line
                or "envelope extended" in line]
        assert len(told) == len(set(told)) == 6, lines
        assert "asked to extend the envelope by 14 h (+$874.02, 4 h → 18 h" in told[0]
        assert told[0].endswith("it needs 2 approvers")
        assert f"1 of 2 approvals for +14 h: <@{BOB}>" in told[1]
        assert f"2 of 2 approvals for +14 h: <@{CAROL}>" in told[2]
        assert "envelope extended by 14 hours" in told[3], told
        assert "asked to extend the envelope by 3 h (+$187.29, 18 h → 21 h" in told[4]
        assert f"Rejected by <@{BOB}>" in told[5] and f"asked by <@{ALICE}>" in told[5]
