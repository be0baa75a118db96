"""`/cluster audit export [YYYY-MM]` and `cluster-bot audit-export`: a month's audit trail as a
CSV file, the same rows `/cluster audit` shows."""

import asyncio
import csv
import io

from bot.app.cli import main
from bot.domain.audit_csv import COLUMNS, row_of
from bot.domain.models import Actor
from bot.slack.ids import Action
from tests.e2e.harness import ALICE, BOB, bot


async def session(h):
    cluster_id = await h.running_cluster("quote h100x8 nodes=2")
    await h.slash(f"terminate {cluster_id}", user="U0DAVE")  # a refusal, audited too
    await h.slash(f"terminate {cluster_id}")
    await h.click(h.last_ephemeral(ALICE, containing=Action.TERMINATE), Action.TERMINATE,
                  user=ALICE)
    await h.advance(60)
    return cluster_id


def rows(text):
    reader = csv.DictReader(io.StringIO(text))
    assert tuple(reader.fieldnames or ()) == COLUMNS
    return list(reader)


async def test_the_export_is_the_trail_audit_shows_as_a_file_in_the_dm(tmp_path):
    async with bot(tmp_path) as h:
        await session(h)
        shown = await h.rt.services.clusters.audit(subject_id=None, actor=Actor(user_id=BOB))
        assert 5 <= len(shown) < 40  # all of it fits on /cluster audit's one page
        await h.slash("audit export", user=BOB)
        assert "in your DM" in h.text_of(h.last_ephemeral(BOB, containing="CSV"))
        dm = h.slack.dm_channel(BOB)
        [upload] = h.slack.uploads.shared_in(dm)
        assert upload.filename == "cluster-bot-audit-2026-11.csv"
        assert upload.data is not None
        exported = rows(upload.data.decode("utf-8"))
        assert exported[:-1] == [row_of(e) for e in reversed(shown)]  # oldest first
        # … and then that reading: a successful read of the trail is recorded too.
        assert (exported[-1]["action"], exported[-1]["actor_id"], exported[-1]["outcome"]) == (
            "read_audit", BOB, "ok")
        assert {r["outcome"] for r in exported} >= {"ok", "refused"}
        assert any(r["action"] == "terminate" and r["actor_id"] == ALICE for r in exported)
        # The file arrived through Slack's three steps, in the asker's DM.
        methods = [c.method for c in h.slack.calls]
        assert "files.getUploadURLExternal" in methods
        assert "files.completeUploadExternal" in methods

        await h.slash("audit export 2026-10", user=BOB)  # a month with nothing
        october = [u for u in h.slack.uploads.shared_in(dm) if "2026-10" in u.filename]
        assert [rows(u.data.decode()) for u in october if u.data is not None] == [[]]


async def test_only_approvers_export_and_a_bad_month_is_named(tmp_path):
    async with bot(tmp_path) as h:
        await h.slash("audit export", user=ALICE)
        assert "Only approvers" in h.text_of(h.slack.ephemerals(ALICE)[-1])
        reply = await h.slash("audit export 2026-13", user=BOB)
        assert "2026-13" in str(reply.body) and "YYYY-MM" in str(reply.body)
        await h.slash("audit export 2026-11 more", user=BOB)
        assert h.slack.uploads.uploaded == []


async def test_the_command_line_export_writes_the_same_csv(tmp_path, monkeypatch):
    async with bot(tmp_path) as h:
        await session(h)
        shown = await h.rt.services.clusters.audit(subject_id=None, actor=Actor(user_id=BOB))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'bot.db'}")
    out = tmp_path / "audit.csv"
    code = await asyncio.to_thread(main, ["audit-export", "--month", "2026-11",
                                          "--out", str(out)])
    assert code == 0
    exported = rows(out.read_text(encoding="utf-8"))
    assert exported[:-1] == [row_of(e) for e in reversed(shown)]
    assert exported[-1]["action"] == "read_audit"  # the read that `shown` is
    bad = await asyncio.to_thread(main, ["audit-export", "--month", "November"])
    assert bad == 2
