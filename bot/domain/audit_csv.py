"""The audit trail as CSV, for finance and security: one row per audit entry, oldest first.

Columns (RFC 4180, UTF-8, header row first):

    at               when it happened, ISO 8601 in UTC (2026-11-30T14:05:00+00:00)
    actor_id         the Slack user who acted; empty for the bot itself (a sweep, a timer)
    team_id          the Slack workspace of the actor; may be empty
    action           quote, request, approve, reject, launch, terminate, recover, extend, …
    subject_id       the request, cluster, quote or volume it is about
    amount_cents     the hourly rate or the sum concerned, in cents; may be empty
    outcome          ok, refused or failed
    detail           the reason or the error, in words
    idempotency_key  the key sent to AI Reserve, if any
    project          the project (`project=`) of the request, cluster or quote it is about

Used by `/cluster audit export [YYYY-MM]` (a file in the asker's DM) and by
`cluster-bot audit-export --month YYYY-MM --out FILE`.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping

from bot.domain.models import AuditEntry

COLUMNS = ("at", "actor_id", "team_id", "action", "subject_id", "amount_cents", "outcome",
           "detail", "idempotency_key", "project")


def row_of(entry: AuditEntry, projects: Mapping[str, str] | None = None) -> dict[str, str]:
    return {
        "at": entry.at.isoformat(), "actor_id": entry.actor_id or "",
        "team_id": entry.team_id or "", "action": entry.action, "subject_id": entry.subject_id,
        "amount_cents": "" if entry.amount_cents is None else str(entry.amount_cents),
        "outcome": entry.outcome, "detail": entry.detail,
        "idempotency_key": entry.idempotency_key or "",
        "project": (projects or {}).get(entry.subject_id, ""),
    }


def to_csv(entries: Iterable[AuditEntry], projects: Mapping[str, str] | None = None) -> str:
    """`projects`: subject id → project (storage/projects.py)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, lineterminator="\r\n")
    writer.writeheader()
    for entry in entries:
        writer.writerow(row_of(entry, projects))
    return out.getvalue()


def filename(month: str) -> str:
    return f"cluster-bot-audit-{month}.csv"

