"""The whole flow over Slack's protocol: quote → request → approve → launch → run → terminate.

On SQLite and on PostgreSQL (`database_url`, tests/e2e/conftest.py)."""

import json

from bot.slack.blocks.launch_modal import FIELD_NAME, FIELD_SSH_KEYS
from bot.slack.ids import Action
from tests.e2e.harness import ALICE, APPROVALS, BOB, GENERAL, bot


async def test_quote_request_approve_launch_run_terminate(tmp_path, database_url):
    async with bot(tmp_path, database_url=database_url) as h:
        card = await h.quote("quote h100x8 nodes=4 storage=1000")
        quote_text = h.text_of(card)
        assert "$124.90" in quote_text or "124" in quote_text  # 32 × $3.90 + disks + volume
        assert "one node" in quote_text.lower()

        await h.click(card, Action.QUOTE_REQUEST_LAUNCH, user=ALICE)
        modal = h.slack.last_view(ALICE)
        assert "MALLOC_ARENA_MAX=1" in json.dumps(modal)
        await h.submit(modal, values={
            FIELD_NAME: {FIELD_NAME: "dsv3-serve"},
            FIELD_SSH_KEYS: {FIELD_SSH_KEYS: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEx alice@lap"},
        })
        approval = h.cards()[-1]
        assert approval.channel == APPROVALS
        assert f"<@{ALICE}>" in h.text_of(approval)
        progress = h.progress(GENERAL)[-1]
        assert "approval" in h.text_of(progress).lower()

        await h.click(approval, Action.APPROVE, user=BOB)
        edited = h.cards()[-1]
        assert Action.APPROVE not in json.dumps(edited.blocks)  # buttons removed
        assert f"<@{BOB}>" in h.text_of(edited)
        clusters = h.rt.simulator.engine.list_clusters()
        assert len(clusters) == 1
        cluster_id = clusters[0].id

        await h.advance(60)  # four nodes boot 5 s apart in the fast profile
        progress = h.progress(GENERAL)[-1]
        assert "running" in h.text_of(progress).lower()
        dms = h.slack.dms(ALICE)
        assert any("ssh -p" in h.text_of(m) for m in dms)
        assert "ssh -p" not in h.channel_payloads()
        assert not any("ssh -p" in h.text_of(m) for m in h.slack.dms(BOB))

        await h.advance(3600 * 2)
        await h.click(h.progress(GENERAL)[-1], Action.TERMINATE, user=ALICE)
        await h.advance(30)
        final = h.text_of(h.progress(GENERAL)[-1]).lower()
        assert "terminated" in final
        record = await _record(h, cluster_id)
        assert record.accrued_hours == 3 and record.accrued_cents == 3 * record.hourly_cents
        assert "volume" in final  # the shared volume keeps billing until deleted


async def _record(h, cluster_id):
    async with h.rt.db.transaction() as repos:
        return await repos.clusters.get(cluster_id)
