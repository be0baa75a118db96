"""The thread is the truth: after each scenario, the request's thread is read back from the
workspace and compared with the audit trail — every decision, refusal, failure and retry the
trail records appears once, in the trail's order, and the thread says nothing else than those
and what AI Reserve was seen doing (launching, ready, connection details, the watcher's
notices)."""

import copy
import re

from bot.domain.models import AuditEntry, RequestStatus
from bot.slack.ids import Action
from tests.e2e.harness import ALICE, BOB, CAROL, GENERAL, bot
from tests.e2e.test_policy import policy

# What the thread says for one audit row (None: a row with no step of its own, e.g. a quote,
# or an approval press the spend policy refused — its `budget` row is that step).
STEPS: dict[tuple[str, str], str | None] = {
    ("quote", "ok"): None,
    ("request", "ok"): "Requested by <@{actor}>",
    ("approve", "ok"): "<@{actor}>",
    ("approve", "refused"): None,
    ("budget", "refused"): "the spend policy refused it at approval",
    ("expire", "ok"): "The quote expired",
    ("reprice", "ok"): "priced again",
    ("reprice", "refused"): "priced again",
    ("launch", "failed"): "Launch failed",
    ("retry", "ok"): "Retried by <@{actor}>",
    ("launch", "ok"): "Cluster `{subject}` created",
    ("reject", "ok"): "Rejected by <@{actor}>",
    ("withdraw", "ok"): "Withdrawn by <@{actor}>",
    ("terminate", "ok"): "Receipt for cluster {subject}",
    ("extend", "ok"): "<@{actor}> extended the envelope",
}
# What the thread may say that the trail doesn't record: what AI Reserve was seen doing.
OBSERVED = (":rocket: Launching at AI Reserve", "Ready", "Connection details sent")


async def trail(h, *subjects):
    async with h.rt.db.transaction() as repos:
        entries = await repos.audit.list(limit=500)
    return [e for e in reversed(entries) if e.subject_id in subjects]


def expected(entry: AuditEntry) -> str | None:
    said = STEPS[(entry.action, entry.outcome)]
    return said and said.format(actor=entry.actor_id, subject=entry.subject_id)


async def thread_lines(h, request_id):
    async with h.rt.db.transaction() as repos:
        top = await repos.messages.get("progress", request_id)
    assert top is not None
    return [m.text for m in h.slack.thread(top.channel_id, top.ts)[1:]]


async def assert_thread_is_the_trail(h, request_id, *, cluster_id=None):
    """Each audited step once, in the trail's order; every other line an observation."""
    entries = await trail(h, request_id, *([cluster_id] if cluster_id else []))
    lines = await thread_lines(h, request_id)
    assert len(lines) == len(set(lines)), lines  # nothing twice
    wanted = [w for w in map(expected, entries) if w]
    position = 0
    matched: set[int] = set()
    for want in wanted:
        found = next((i for i in range(position, len(lines)) if want in lines[i]), None)
        assert found is not None, (want, lines,
                                   [(e.action, e.outcome) for e in entries])
        matched.add(found)
        position = found + 1
    for i, line in enumerate(lines):
        assert i in matched or any(o in line for o in OBSERVED), (line, wanted)
    return lines


async def test_two_approvals_then_a_budget_refusal_at_approval(tmp_path):
    # $124.85/h needs two approvers; each request holds $1,747.90 of the month: the second one
    # fits the $3,000 budget alone when asked, not beside the first once both are approved.
    async with bot(tmp_path, policy=policy(budgets={"users": {ALICE: 3000}})) as h:
        first = copy.deepcopy(await h.request(quote_text="quote h100x8 nodes=4"))
        [first_id] = [r.id for r in await h.requests_in_db()]
        second = copy.deepcopy(await h.request(quote_text="quote h100x8 nodes=4"))
        [second_id] = [r.id for r in await h.requests_in_db() if r.id != first_id]
        for card in (first, second):
            await h.click(card, Action.APPROVE, user=BOB)
        lines = await thread_lines(h, second_id)
        assert "1 of 2 approvals: <@U0BOB>" in lines[-1]
        assert not any("Approved by <@U0BOB>" in line for line in lines)  # not yet approved
        await h.click(first, Action.APPROVE, user=CAROL)
        await h.click(second, Action.APPROVE, user=CAROL)
        by_id = {r.id: r for r in await h.requests_in_db()}
        assert by_id[second_id].status is RequestStatus.FAILED
        lines = await assert_thread_is_the_trail(h, second_id)
        assert "2 of 2 approvals: <@U0CAROL> — but the spend policy refused it" in lines[-1]
        assert "of your $3,000.00 budget" in lines[-1] and "Nothing was launched" in lines[-1]
        assert len(lines) == 3  # requested, 1 of 2, 2 of 2 refused
        launched = by_id[first_id]
        lines = await assert_thread_is_the_trail(h, first_id, cluster_id=launched.cluster_id)
        assert "2 of 2 approvals: <@U0CAROL>" in lines[2] and "— approved" in lines[2]


async def test_a_capacity_failure_and_its_retry_are_in_the_thread(tmp_path):
    async with bot(tmp_path) as h:
        await h.approved_without_room()
        h.sim.engine.set_capacity(accelerator="h100-sxm-80gb", location="us-tx",
                                  placeable_nodes=8)
        await h.click(h.cards()[-1], Action.RETRY_LAUNCH, user=ALICE)
        [request] = await h.requests_in_db()
        assert request.cluster_id is not None
        await h.advance(60)
        await h.slash(f"terminate {request.cluster_id}")
        await h.click(h.last_ephemeral(ALICE, containing=Action.TERMINATE), Action.TERMINATE,
                      user=ALICE)
        await h.advance(60)
        lines = await assert_thread_is_the_trail(h, request.id, cluster_id=request.cluster_id)
        steps = [next(w for w in ("Requested", "Approved by <@U0BOB>", "Launching at",
                                  "Launch failed", "Retried", "created", "Ready",
                                  "Connection", "Receipt") if w in line) for line in lines]
        assert steps == ["Requested", "Approved by <@U0BOB>", "Launching at", "Launch failed",
                         "Retried", "created", "Ready", "Connection", "Receipt"], lines
        assert "place every node" in next(line for line in lines if "Launch failed" in line)


async def test_planned_for_only_with_hours(tmp_path):
    async with bot(tmp_path, policy=policy(limits={"max_lifetime_hours": 72})) as h:
        await h.request(quote_text="quote h100x8 nodes=2")
        await h.request(quote_text="quote h100x8 nodes=2 hours=3")
        asked = sorted([(await thread_lines(h, r.id))[0] for r in await h.requests_in_db()],
                       key=lambda line: "hours=" in line)
        assert "planned" not in asked[0] and "lifetime of 72 h" in asked[0]
        assert "planned for 3 h (`hours=3`)" in asked[1]


async def test_an_expired_quote_and_its_fresh_card_are_in_the_thread(tmp_path):
    async with bot(tmp_path) as h:
        old = copy.deepcopy(await h.request())
        await h.advance(16 * 60)
        await h.rt.services.approvals.show_expired()
        await h.rt.settle()
        assert ":hourglass: Quote expired" in h.text_of(h.cards()[-1])
        await h.click(old, Action.APPROVE, user=BOB)  # re-prices, posts a fresh card
        [request] = await h.requests_in_db()
        lines = await assert_thread_is_the_trail(h, request.id)
        assert "The quote expired" in lines[-2]
        assert re.search(r"priced again at \$[\d,.]+/h \(was \$[\d,.]+/h\)", lines[-1])


async def test_withdrawn_and_rejected_requests_end_their_threads(tmp_path):
    async with bot(tmp_path) as h:
        await h.request()
        await h.click(h.progress(GENERAL)[-1], Action.WITHDRAW, user=ALICE)
        rejected = await h.request()
        await h.click(rejected, Action.REJECT, user=CAROL)
        by_status = {r.status: r for r in await h.requests_in_db()}
        withdrawn, refused = by_status[RequestStatus.WITHDRAWN], by_status[RequestStatus.REJECTED]
        lines = await assert_thread_is_the_trail(h, withdrawn.id)
        assert "Withdrawn by <@U0ALICE>" in lines[-1] and len(lines) == 2
        lines = await assert_thread_is_the_trail(h, refused.id)
        assert "Rejected by <@U0CAROL>" in lines[-1] and len(lines) == 2
