"""Who approved a request: the one answer the receipt, the approval card, the cluster message
and the thread all give (issue 27.1).

The approvals that count are those of the request's current quote. A request that waited for
stock launches from a fresh quote at or under the approved rate (bot/services/stock.py) and keeps
its decision (`decided_by`): its approvals are those of the quote that was approved, the last one
anyone approved. A re-priced request is decided again (`decided_by` cleared): the approvals of
its earlier quotes no longer count, and nobody approving it means the spend policy did.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.domain.models import Approval, Decision, LaunchRequest


def approvals_that_count(req: LaunchRequest, approvals: Sequence[Approval]) -> list[Approval]:
    """The approvals that approved `req` as it stands, one per person, in the order given."""
    given = [a for a in approvals if a.request_id == req.id and a.decision is Decision.APPROVE]
    current = [a for a in given if a.quote_id == req.quote_id]
    if not current and req.decided_by is not None and given:
        current = [a for a in given if a.quote_id == given[-1].quote_id]
    found: list[Approval] = []
    for a in current:
        if all(f.approver_id != a.approver_id for f in found):
            found.append(a)
    return found


def approved_by(req: LaunchRequest, approvals: Sequence[Approval]) -> list[str]:
    """The people who approved `req` as it stands (empty: nobody did — the spend policy did, or
    nobody yet)."""
    return [a.approver_id for a in approvals_that_count(req, approvals)]
