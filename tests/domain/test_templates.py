"""Templates, projects and port tunnels: the pure rules."""

from datetime import timedelta

from bot.domain.extension import judge_extension
from bot.domain.models import (
    LaunchRequest,
    ReadinessRule,
    RequestStatus,
    Workload,
)
from bot.domain.policy import Policy, Project, evaluate, judge_spend
from bot.domain.spend import MonthSpend, committed_spend, spend_report
from bot.domain.templates import ClusterTemplate, name_problem, pick, visible_scopes
from bot.domain.tunnels import tunnel_lines
from tests.domain import NOW, make_cluster

HOURS_LEFT = 38  # from NOW (29 Nov 10:00) to 1 Dec
LLAMA = Project(name="llama", monthly_cents=5_000_00)
POLICY = Policy(approver_ids=frozenset({"U0BOB"}), projects=(LLAMA, Project(name="vision")))


def test_a_project_budget_is_judged_like_a_team_budget_whoever_spends():
    spent = MonthSpend(project_cents={"llama": 5_000_00 - 100_00 * HOURS_LEFT + 1})
    v = evaluate(POLICY, requester="U0ERIN", accelerator_id="h100-sxm-80gb", nodes=2,
                 hourly_cents=100_00, month_spend=spent, now=NOW, project="llama")
    assert v.is_refusal and v.refused == (
        "Project llama: $5,000.01 of $5,000.00 ($1,200.01 spent, held or still to run; "
        "$3,800.00 for this one).")
    # Exactly reaching it fits; another project, or none, is not judged against it.
    fits = MonthSpend(project_cents={"llama": 5_000_00 - 100_00 * HOURS_LEFT})
    assert evaluate(POLICY, requester="U0ERIN", accelerator_id="h100", nodes=2,
                    hourly_cents=100_00, month_spend=fits, now=NOW,
                    project="llama").refused is None
    for other in ("vision", None):
        assert evaluate(POLICY, requester="U0ERIN", accelerator_id="h100", nodes=2,
                        hourly_cents=100_00, month_spend=spent, now=NOW,
                        project=other).refused is None
    # With overrides by admins the same rule asks an admin instead.
    lenient = POLICY.model_copy(update={"overrides_by_admins": True})
    asked = judge_spend(lenient, spender="U0ERIN", adds_cents=1, approvals_needed=0,
                        month_spend=MonthSpend(project_cents={"llama": 5_000_00}),
                        project="llama")
    assert asked.override and not asked.is_refusal and asked.approvals_needed == 1


def test_an_extension_counts_against_the_clusters_project():
    cluster = make_cluster(project="llama", lifetime_hours=10)
    spent = MonthSpend(project_cents={"llama": 4_990_00})
    j = judge_extension(POLICY, cluster=cluster, hours=10, asker_is_approver=False,
                        asker="U0ALICE", month_spend=spent, now=NOW)
    assert j.verdict.refused is not None and "Project llama" in j.verdict.refused
    no_project = make_cluster(lifetime_hours=10)
    assert judge_extension(POLICY, cluster=no_project, hours=10, asker_is_approver=False,
                           asker="U0ALICE", month_spend=spent, now=NOW).verdict.refused is None


def _request(id, *, requester, project, status=RequestStatus.APPROVED):
    return LaunchRequest(id=id, quote_id=f"q-{id}", requester_id=requester, team_id=None,
                         channel_id="C0GPU", workload=Workload(), status=status,
                         hourly_cents=10_00, lifetime_hours=5, created_at=NOW,
                         updated_at=NOW, project=project)


def test_committed_spend_counts_the_projects_clusters_and_requests_of_everyone():
    mine = make_cluster("c1", project="llama")
    theirs = make_cluster("c2", owner_id="U0DAVE", project="llama")
    elsewhere = make_cluster("c3", owner_id="U0DAVE", project="vision")
    requests = [_request("r1", requester="U0DAVE", project="llama"),
                _request("r2", requester="U0DAVE", project="vision"),
                _request("r3", requester="U0DAVE", project="llama",
                         status=RequestStatus.PENDING)]  # not committed yet
    month = committed_spend([mine], requests, user="U0ALICE", teams=(), now=NOW,
                            project="llama", project_clusters=[mine, theirs, elsewhere, theirs])
    one = committed_spend([mine], [], user="U0ALICE", teams=(), now=NOW).user_cents
    assert month.project_cents == {"llama": 2 * one + 5 * 10_00}
    assert month.user_cents == one  # the person's own budget is unchanged by the project
    assert committed_spend([mine], requests, user="U0ALICE", teams=(),
                           now=NOW).project_cents == {}


def test_spend_by_project_adds_up_to_the_total():
    clusters = [make_cluster("c1", project="llama"), make_cluster("c2", project="vision"),
                make_cluster("c3"), make_cluster("c4", project="llama")]
    report = spend_report(clusters, None, NOW + timedelta(minutes=1))
    assert [p for p, _ in report.by_project] == ["llama", "vision", None]
    assert dict(report.by_project)["llama"] == 2 * dict(report.by_project)["vision"]
    assert sum(c for _, c in report.by_project) == report.total_cents


def _template(name="serve", scope="user:U0ALICE", **changes):
    return ClusterTemplate(id=f"t-{name}-{scope}", name=name, scope=scope, owner_id="U0ALICE",
                           source_cluster_id="clu_1", accelerator="h100-sxm-80gb",
                           gpus_per_node=8, nodes=2, created_at=NOW, **changes)


def test_template_names_scopes_and_what_the_form_starts_from():
    assert name_problem("") is not None and "at most 40" in name_problem("a" * 41)
    assert "lower-case" in name_problem("Serve") and name_problem("llama-serve_2") is None
    scopes = visible_scopes("U0ALICE", ["research"])
    assert scopes == ("user:U0ALICE", "team:research", "team:*")
    shared, own = _template(scope="team:research"), _template()
    assert pick([shared, own], "serve", scopes) is own  # a person's own first
    assert pick([shared], "serve", scopes) is shared
    assert pick([_template(scope="team:other")], "serve", scopes) is None
    t = _template(env_names=("HF_TOKEN",), ports=("8000/http",), image="vllm/vllm",
                  readiness=ReadinessRule(pattern="ready"), hours=36, project="llama",
                  storage_gb=500, location="us-tx")
    assert t.launch_defaults() == Workload(image="vllm/vllm", ports=("8000/http",),
                                           env={"HF_TOKEN": ""},
                                           readiness=ReadinessRule(pattern="ready"))
    assert t.quote_options() == {"nodes": "2", "orchestrator": "none", "location": "us-tx",
                                 "storage": "500", "hours": "36", "project": "llama"}
    assert "idle" in ClusterTemplate.model_fields  # the idle branch's extension point


def test_each_port_gets_a_tunnel_through_the_primary_but_ssh_itself():
    lines = tunnel_lines(["8000/http", "22/tcp", "443/tcp", "bad"], host="203.0.113.10",
                         ssh_port=22001, user="root")
    assert lines == [
        ("8000/http", "ssh -L 8000:localhost:8000 -N -p 22001 root@203.0.113.10"),
        ("443/tcp", "ssh -L 10443:localhost:443 -N -p 22001 root@203.0.113.10"),
    ]
    assert tunnel_lines([], host="h", ssh_port=1, user="u") == []
