"""`/cluster list`, `status <id>` and `terminate <id>`, and who may terminate."""

from bot.slack.ids import Action
from tests.e2e.harness import ALICE, BOB, DAVE, GENERAL, bot


async def launched(h):
    card = await h.request()
    await h.click(card, Action.APPROVE, user=BOB)
    [cluster] = h.sim.engine.list_clusters()
    return cluster.id


async def test_list_and_status(tmp_path):
    async with bot(tmp_path) as h:
        await h.slash("list")
        assert "no live clusters" in h.text_of(h.slack.ephemerals(ALICE)[-1]).lower()
        cluster_id = await launched(h)
        await h.advance(60)
        await h.slash("list", user=DAVE)
        listing = h.text_of(h.last_ephemeral(DAVE, containing=cluster_id))
        assert "$124" in listing or "124." in listing
        assert f"<@{ALICE}>" in listing
        await h.slash(f"status {cluster_id}", user=DAVE)
        status = h.text_of(h.last_ephemeral(DAVE, containing=cluster_id))
        assert "running" in status.lower()
        assert "ssh -p" not in status  # connection details are the owner's, by DM only


async def test_terminate_by_command_needs_owner_or_approver_and_a_confirm(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id = await launched(h)
        await h.slash(f"terminate {cluster_id}", user=DAVE)
        assert "Only the owner" in h.text_of(h.slack.ephemerals(DAVE)[-1])
        await h.click(h.progress(GENERAL)[-1], Action.TERMINATE, user=DAVE)
        assert h.sim.engine.get_cluster(cluster_id).status.value == "provisioning"

        await h.slash(f"terminate {cluster_id}", user=ALICE)
        prompt = h.last_ephemeral(ALICE, containing=Action.TERMINATE)
        assert "confirm" in str(prompt.blocks)  # the button asks before it acts
        await h.click(prompt, Action.TERMINATE, user=ALICE)  # mid-provision: accepted
        await h.advance(30)
        cluster = h.sim.engine.get_cluster(cluster_id)
        assert cluster.status.value == "terminated"
        assert cluster.billing.accrued_cents == 0  # never became ready, never billed
        assert "terminated" in h.text_of(h.progress(GENERAL)[-1]).lower()
        await h.slash(f"terminate {cluster_id}", user=ALICE)
        assert "already terminated" in h.text_of(h.slack.ephemerals(ALICE)[-1])
