"""`make run`'s terminal (devslack/local.py): `sim log` makes the workload print its readiness line,
and the launch reaches **Serving** in the local workspace."""

from __future__ import annotations

import io

from bot.slack.blocks.launch_modal import FIELD_READINESS
from bot.slack.ids import Action
from devslack.local import ClusterTerminal
from devslack.workspace import LocalWorkspace
from tests.e2e.harness import BOB, SECRET, bot


def after(text: str, marker: str) -> str:
    assert marker in text, f"{marker!r} not in transcript:\n{text}"
    return text[text.index(marker):]


async def test_sim_log_brings_a_readiness_checked_launch_to_serving(tmp_path):
    async with bot(tmp_path) as h:
        card = await h.request(quote_text="quote h100x8 nodes=2",
                               values={FIELD_READINESS: {FIELD_READINESS: "vllm"}})
        await h.click(card, Action.APPROVE, user=BOB)
        async with LocalWorkspace(slack=h.slack, events_url=h.requests.events_url,
                                  signing_secret=SECRET, approvers=["bob", "carol"],
                                  settle_quiet=0.05) as workspace:
            output = io.StringIO()
            lines = ["sim advance 1m", "sim log node=1 still loading",
                     "sim log INFO: Application startup complete.", "sim log", "quit"]
            terminal = ClusterTerminal(workspace, rt=h.rt, clock=h.clock,  # type: ignore[arg-type]
                                       input=io.StringIO("".join(f"{x}\n" for x in lines)),
                                       output=output)
            await terminal.run()
            text = output.getvalue()
        cluster_id = (await h.requests_in_db())[-1].cluster_id
        assert f"node 1 of {cluster_id} printed: still loading" in text
        # Serving shows up after the line was printed, never before, and once.
        assert text.index("is serving") > text.index("sim log INFO: Application startup")
        assert text.count("is serving") == 1
        assert "sim log [CLUSTER] [node=RANK] LINE" in after(text, "> sim log\n")
        assert len(await h.notices(cluster_id, "is serving")) == 1
