"""Issue 16, done-when: a randomized run of extensions and launch approvals against budgets, on
SQLite and PostgreSQL, with concurrent presses — committed spend never goes above a budget, and
no extension is applied without the approvals its amount needs.

Seeded (`EXTENSION_SEED` to replay); the figures are printed (`pytest -s`). Withdrawals are built
elsewhere (issue 16, item 7) and are not exercised here.
"""

import asyncio
import copy
import json
import os
import random
import re
import sys
from dataclasses import dataclass

import pytest
import yaml

from bot.domain.extension import ExtensionStatus, tier_hours
from bot.domain.policy import approvals_for_spend
from bot.services import budgets
from bot.slack.ids import Action
from tests.e2e.harness import ALICE, APPROVALS, BOB, CAROL, DAVE, LEADS, bot

STEPS = 40
DEFAULT_SEED = 16  # reaches cards and approvals by card on both databases (see below)
LIFETIME = 8
# Budgets tight enough that about half the asks and launches are refused: h100x8 nodes=2 is
# $62.43/h and 14 accruals remain in the month.
USER_BUDGET = {ALICE: 1500, DAVE: 1100}
TEAM = {"research": {"members": [ALICE, DAVE], "monthly": 2300}}
APPROVERS = {BOB, CAROL}


def policy() -> str:
    return yaml.safe_dump({
        "approvals_channel": APPROVALS,
        "approvers": {"users": [BOB], "group": LEADS},
        "approval": {"auto_approve_below": 10.0, "one_approver_up_to": 100.0},
        "budgets": {"users": USER_BUDGET, "teams": TEAM},
        "limits": {"max_lifetime_hours": LIFETIME},
    })


@dataclass
class Figures:
    steps: int = 0
    asks: int = 0
    presses: int = 0
    applied_at_once: int = 0
    cards: int = 0
    applied_by_card: int = 0
    refused: int = 0
    launches: int = 0
    checks: int = 0
    held: int = 0


def words(message) -> str:
    return message.text + json.dumps(message.blocks, ensure_ascii=False)


async def check(h, figures: Figures, base: dict[str, int]) -> None:
    """The two invariants, read from the database after every step."""
    now = h.clock.now()
    pol = h.rt.services.people.policy
    async with h.rt.db.transaction() as repos:
        spent = {who: await budgets.committed(repos, pol, requester=who, now=now)
                 for who in USER_BUDGET}
        clusters = {c.id: c for c in await repos.clusters.list_live()}
        exts = await repos.extensions.list_all()
        rows = [e for e in await repos.audit.list(limit=5000) if e.action == "extend"
                and e.outcome == "ok"]
    figures.checks += 1
    ok = True
    for who, dollars in USER_BUDGET.items():
        ok &= spent[who].user_cents <= dollars * 100
    team = max(s.team_cents.get("research", 0) for s in spent.values())
    ok &= team <= TEAM["research"]["monthly"] * 100
    # Every hour added to an envelope is accounted for by one applied extension …
    added: dict[str, int] = {}
    for row in rows:
        hours = int(re.match(r"\+(\d+) h", row.detail).group(1))  # type: ignore[union-attr]
        added[row.subject_id] = added.get(row.subject_id, 0) + hours
        if "auto-approved" in row.detail:
            # … auto-approved only under the tier and within the lifetime …
            before = int(re.search(r"envelope (\d+) h", row.detail).group(1))  # type: ignore
            cents = row.amount_cents or 0
            ok &= approvals_for_spend(pol, added_cents=cents,
                                      tier_hours=tier_hours(pol, hours)) == 0
            ok &= before + hours <= LIFETIME
        elif "an approver" in row.detail:
            who = re.search(r"approved by <@(\w+)>", row.detail).group(1)  # type: ignore
            ok &= who in APPROVERS and who != clusters[row.subject_id].owner_id
    for cluster_id, c in clusters.items():
        ok &= c.lifetime_hours == base[cluster_id] + added.get(cluster_id, 0)
    # … and a card applied only with enough distinct approvers, never the owner.
    for e in exts:
        if e.status is ExtensionStatus.APPLIED:
            needed = approvals_for_spend(pol, added_cents=e.added_cents,
                                         tier_hours=tier_hours(pol, e.hours))
            if e.to_hours > LIFETIME:
                needed = max(needed, 1)
            ok &= len(set(e.approved_by)) == len(e.approved_by) >= max(1, needed)
            ok &= e.owner_id not in e.approved_by and set(e.approved_by) <= APPROVERS
    figures.held += ok
    assert ok, (spent, exts, rows)


@pytest.mark.slow  # a longer scenario: scheduled early (tests/conftest.py)
async def test_extensions_and_approvals_never_overspend_nor_skip_an_approver(tmp_path,
                                                                             database_url):
    # A fixed seed, so that every run checks the same 40 steps and they are known to reach every
    # path (cards, approvals by card, refusals); EXTENSION_SEED=N explores another run.
    explored = os.environ.get("EXTENSION_SEED")
    seed = int(explored or DEFAULT_SEED)
    rng = random.Random(seed)
    figures = Figures()
    base: dict[str, int] = {}
    async with bot(tmp_path, policy=policy(), database_url=database_url) as h:

        async def launch(who: str) -> None:
            hours = rng.randint(1, 4)
            card = copy.deepcopy(await h.request(user=who,
                                                 quote_text=f"quote h100x8 nodes=2 hours={hours}"))
            if "request_approve" not in words(card):
                return  # refused when asked: its numbers are on the card
            presses = [h.requests.click(card, Action.APPROVE, user_id=rng.choice([BOB, CAROL]))
                       for _ in range(rng.randint(1, 3))]
            figures.presses += len(presses)
            await asyncio.gather(*presses)
            await h.rt.settle()
            await h.advance(60)
            figures.launches += 1
            for r in await h.requests_in_db():
                if r.cluster_id and r.cluster_id not in base:
                    base[r.cluster_id] = r.lifetime_hours or 0

        async def ask() -> None:
            if not base:
                return
            cluster_id = rng.choice(sorted(base))
            asker = rng.choice([ALICE, DAVE, BOB, CAROL])
            hours = rng.choice([1, 1, 2, 3, 5, 8, 14])
            before = len(h.slack.ephemerals(asker))
            await h.slash(f"extend {cluster_id} {hours}", user=asker)
            figures.asks += 1
            preview = h.slack.ephemerals(asker)[before:][-1]
            if Action.EXTEND not in words(preview):
                figures.refused += 1
                return
            frozen = copy.deepcopy(preview)
            presses = [h.requests.click(frozen, Action.EXTEND, user_id=asker)
                       for _ in range(rng.randint(1, 2))]
            figures.presses += len(presses)
            await asyncio.gather(*presses)
            await h.rt.settle()

        async def approve() -> None:
            async with h.rt.db.transaction() as repos:
                pending = await repos.extensions.pending()
            if not pending:
                return
            ext = rng.choice(pending)
            [card] = [m for m in h.cards() if ext.id in words(m)]
            frozen = copy.deepcopy(card)
            who = [rng.choice([BOB, CAROL, ext.owner_id]) for _ in range(rng.randint(1, 4))]
            action = Action.EXTENSION_REJECT if rng.random() < 0.1 else Action.EXTENSION_APPROVE
            figures.presses += len(who)
            await asyncio.gather(*(h.requests.click(frozen, action, user_id=u) for u in who))
            await h.rt.settle()

        for who in (ALICE, DAVE, ALICE):
            await launch(who)
        await check(h, figures, base)
        for _ in range(STEPS):
            step = rng.choices([ask, approve, launch], weights=[5, 4, 1])[0]
            await (step(rng.choice([ALICE, DAVE])) if step is launch else step())
            figures.steps += 1
            await check(h, figures, base)
        async with h.rt.db.transaction() as repos:
            exts = await repos.extensions.list_all()
            rows = [e for e in await repos.audit.list(limit=5000)
                    if e.action == "extend" and e.outcome == "ok"]
        figures.cards = len(exts)
        figures.applied_by_card = sum(e.status is ExtensionStatus.APPLIED for e in exts)
        figures.applied_at_once = len(rows) - figures.applied_by_card
        figures.refused += sum(e.status is ExtensionStatus.REFUSED for e in exts)
    sys.stdout.write(
        f"\nextension budgets ({database_url and 'postgresql' or 'sqlite'}, seed {seed}): "
        f"{figures.steps} steps, {figures.asks} asks, {figures.launches} launches, "
        f"{figures.presses} presses (concurrent); {figures.applied_at_once} applied at once, "
        f"{figures.cards} cards, {figures.applied_by_card} applied by approvers, "
        f"{figures.refused} refused; invariants tried {figures.checks} / held {figures.held}\n")
    assert figures.held == figures.checks == STEPS + 1
    if explored is None:  # a seed explored by hand may not reach every path; the default does
        assert figures.asks and figures.cards and figures.applied_by_card
