"""`make run`'s `sim advance` (devslack/local.py) keeps time as a real clock would: AI Reserve's
clock and the bot's move in steps no longer than the poll interval, each step's sweeps run to
the end, so an enforced envelope is terminated before AI Reserve charges an hour beyond it — as
it is in production — instead of the clock jumping past the deadline between two polls."""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Awaitable, Callable

from bot.jobs import sweeps
from bot.slack.ids import Action
from devslack.local import ClusterTerminal
from devslack.workspace import LocalWorkspace
from tests.e2e.harness import BOB, SECRET, bot


async def test_sim_advance_never_bills_an_enforced_envelope_past_its_hours(tmp_path):
    # `hours=2`: the planned run's envelope ends in termination (as in `make run`'s demo).
    async with bot(tmp_path) as h:
        card = await h.request(quote_text="quote h100x8 nodes=2 hours=2")
        await h.click(card, Action.APPROVE, user=BOB)
        cluster_id = (await h.requests_in_db())[-1].cluster_id
        assert cluster_id is not None
        async with LocalWorkspace(slack=h.slack, events_url=h.requests.events_url,
                                  signing_secret=SECRET, approvers=["bob", "carol"],
                                  settle_quiet=0.05) as workspace:
            output = io.StringIO()
            lines = ["sim advance 1m", "sim advance 1h", "sim advance 1h", "sim advance 10m",
                     "quit"]
            terminal = ClusterTerminal(workspace, rt=h.rt, clock=h.clock,  # type: ignore[arg-type]
                                       input=io.StringIO("".join(f"{x}\n" for x in lines)),
                                       output=output)
            await terminal.run()
        cluster = h.sim.engine.get_cluster(cluster_id)
        # Approved for 2 hours: AI Reserve's own ledger shows 2 charged, never the 3rd.
        assert cluster.status.value in ("terminating", "terminated"), output.getvalue()
        assert cluster.billing.accrued_hours == 2, output.getvalue()
        async with h.rt.db.transaction() as repos:
            entries = await repos.audit.list(subject_id=cluster_id)
        assert any(e.action == "enforce_envelope" for e in entries)
        assert "(moving the clocks in 120 steps of 30 s" in output.getvalue()


async def test_sim_advance_runs_the_money_duties_every_step_and_skips_quiet_polls(
        tmp_path, monkeypatch):
    # `sim advance 25h` took ~40 minutes: every sweep ran at every step. The money duties
    # still do; the poll for a while after AI Reserve changed, before a charge, else once a
    # minute.
    ran: Counter[str] = Counter()

    def counting(name: str) -> Callable[[object], Awaitable[object]]:
        original = getattr(sweeps, name)

        async def counted(services: object) -> object:
            ran[name] += 1
            return await original(services)
        return counted

    for name in ("watch_and_tell", "enforce_envelopes", "finish_terminations",
                 "resume_launches", "remind_volumes"):
        monkeypatch.setattr(sweeps, name, counting(name))
    async with bot(tmp_path) as h:
        card = await h.request(quote_text="quote h100x8 nodes=2")
        await h.click(card, Action.APPROVE, user=BOB)
        async with LocalWorkspace(slack=h.slack, events_url=h.requests.events_url,
                                  signing_secret=SECRET, approvers=["bob", "carol"],
                                  settle_quiet=0.05) as workspace:
            output = io.StringIO()
            lines = ["sim advance 2m", "sim advance 2h", "quit"]
            terminal = ClusterTerminal(workspace, rt=h.rt, clock=h.clock,
                                       input=io.StringIO("".join(f"{x}\n" for x in lines)),
                                       output=output)
            await terminal.run()
        reminders = [m for m in h.slack.dms("alice") if "has run" in h.text_of(m)]
    steps = 4 + 240  # 30 s each
    assert ran["enforce_envelopes"] == ran["finish_terminations"] == steps
    assert ran["resume_launches"] == steps  # every 20 s, as the scheduler: each 30-s step
    assert ran["remind_volumes"] == 24  # every 5 minutes, not every step
    assert ran["watch_and_tell"] <= steps * 0.6, ran  # was: every step
    # …and nothing the polls tell is lost: the cluster ran, both hourly reminders came.
    assert "Running since" in output.getvalue()
    assert len(reminders) == 2, output.getvalue()
