"""Issue 27.8, over Slack against the simulator: a volume a `project=llama` cluster created
bills its own hours (after the cluster ended) to llama — in `/cluster spend by=project` and in
llama's budget — not to "no project"."""

from __future__ import annotations

from datetime import timedelta

from bot.services.budgets import committed
from bot.slack.ids import Action
from tests.e2e.harness import ALICE, bot
from tests.e2e.test_policy import policy
from tests.e2e.test_templates import launched

PROJECTS = {"llama": {"monthly_budget": 100000}}


async def test_a_project_clusters_volume_bills_its_own_hours_to_the_project(tmp_path):
    async with bot(tmp_path, policy=policy(projects=PROJECTS)) as h:
        request = await launched(h, "quote h100x8 nodes=2 storage=1000 project=llama")
        cluster_id = request.cluster_id
        await h.slash(f"terminate {cluster_id}")
        await h.click(h.last_ephemeral(ALICE, containing=Action.TERMINATE), Action.TERMINATE,
                      user=ALICE)
        await h.advance(3 * 3600)  # the kept volume pays its own hours now
        await h.rt.services.volumes.sync()
        report = await h.rt.services.clusters.spend(month=None)
        assert report.volumes_cents > 0
        by_project = dict(report.by_project)
        assert None not in by_project, by_project  # nothing of it is "no project"
        assert by_project["llama"] == report.total_cents
        async with h.rt.db.transaction() as repos:
            held = await committed(repos, h.rt.services.people.policy, requester=ALICE,
                                   now=h.clock.now() + timedelta(seconds=1), project="llama")
        cluster_cents = sum(cents for _, cents in report.by_cluster)
        assert held.project_cents["llama"] >= cluster_cents + report.volumes_cents
