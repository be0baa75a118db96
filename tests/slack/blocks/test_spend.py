import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from bot.domain.models import ClusterRecord, ShapeSpec
from bot.domain.spend import VolumeSpan
from bot.domain.spend import spend_report as domain_spend_report
from bot.slack.blocks.spend import spend_report
from tests.slack.blocks import *


@dataclass(frozen=True)
class Report:
    """Shaped like bot.domain.spend.SpendReport."""

    month: str
    by_owner: list[tuple[str | None, int]] = field(default_factory=list)
    by_cluster: list[tuple[ClusterRecord, int]] = field(default_factory=list)
    total_cents: int = 0
    projected_cents: int = 0
    by_volume: list[tuple[VolumeSpan, int]] = field(default_factory=list)
    volumes_cents: int = 0
    month_end: datetime | None = datetime(2026, 12, 1, tzinfo=UTC)
    capped_by_envelopes: bool = False


def test_report_total_by_owner_and_by_cluster_largest_first():
    small = make_cluster(id="clu_small", name=None, owner_id=None,
                         shape=ShapeSpec(accelerator="h100-sxm-80gb", gpus_per_node=8, nodes=4))
    big = make_cluster()
    report = Report(month="2026-11", by_owner=[(None, 12_000), ("U0ALICE", 450_000)],
                    by_cluster=[(small, 12_000), (big, 450_000)], total_cents=462_000)
    msg = spend_report(report, now=NOW)
    check_message(msg)
    assert buttons(msg) == []
    assert block_dicts(msg)[0]["text"]["text"] == "Spend for 2026-11 (AI Reserve's billed hours)"
    text = all_text(msg)
    assert "*Total: $4,620.00* in 2026-11 across 2 clusters" in text
    assert "• <@U0ALICE> — *$4,500.00*\n• unclaimed — *$120.00*" in text
    assert ("• `clu_9xQe1` *dsv3-serve* · 2 × 8 NVIDIA H100 80GB SXM · <@U0ALICE> — "
            "*$4,500.00*\n• `clu_small` · 4 × 8 NVIDIA H100 80GB SXM · unclaimed — *$120.00*"
            ) in text
    assert msg.text == "Spend for 2026-11: $4,620.00 across 2 clusters"
    assert "will add" not in text


def test_projection_of_the_live_clusters():
    report = Report(month="2026-11", by_owner=[("U0ALICE", 100)],
                    by_cluster=[(make_cluster(), 100)], total_cents=100, projected_cents=150_072)
    text = all_text(spend_report(report, now=NOW))
    assert ("If nobody terminates anything, the live clusters and kept volumes add ≈ $1,500.72 "
            "more from now to the end of the month (<!date^1796083200^") in text
    assert "approved envelope" not in text
    capped = all_text(spend_report(Report(**{**report.__dict__, "capped_by_envelopes": True}),
                                   now=NOW))
    assert "each cluster stops at its approved envelope" in capped


def test_volumes_billed_on_their_own_are_listed_and_counted():
    volume = VolumeSpan(id="vol_3kP0", owner_id="U0BOB", hourly_cents=10, own_from=NOW)
    report = Report(month="2026-11", by_owner=[("U0ALICE", 100), ("U0BOB", 46_001)],
                    by_cluster=[(make_cluster(), 100)], total_cents=46_101,
                    by_volume=[(volume, 46_001)], volumes_cents=46_001)
    text = all_text(spend_report(report, now=NOW))
    assert ("*Total: $461.01* in 2026-11 across 1 cluster and 1 volume ($460.01 for volumes on "
            "their own)") in text
    assert "• `vol_3kP0` · <@U0BOB> — *$460.01*" in text


def test_the_domain_report_fits():
    c = make_cluster(ready_at=NOW - timedelta(hours=3), accrued_hours=3)
    report = domain_spend_report([c], "2026-11", NOW)
    msg = spend_report(report, now=NOW)
    check_message(msg)
    assert "<@U0ALICE>" in all_text(msg)


def test_empty_month():
    msg = spend_report(Report(month="2026-10"), now=NOW)
    text = checked_text(msg)
    assert "*Total: $0.00* in 2026-10 across 0 clusters" in text
    assert "Nothing was billed in 2026-10." in text and "By owner" not in text


def test_overflow_is_summarised_within_limits():
    clusters = [(make_cluster(**{**EXTREME_CLUSTER, "id": f"clu_{i}_{'ü' * 200}"}), i)
                for i in range(1000)]
    owners: list[tuple[str | None, int]] = [(f"U{i:08d}", i) for i in range(1000)]
    report = Report(month=HOSTILE, by_owner=[*owners, (None, 5)], by_cluster=clusters,
                    total_cents=10**12)
    msg = spend_report(report, now=NOW)
    check_message(msg)
    assert_escaped(msg)
    text = all_text(msg)
    assert "more owners" in text and "more clusters" in text
    assert "<@U00000999>" in text  # the largest kept
    assert SECRET not in text
    assert len(json.dumps(msg.as_kwargs())) < 13_000
