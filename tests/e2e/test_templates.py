"""Templates, projects and ports over Slack (issue 19 items 4–6).

A template is saved from a launched cluster and quoted from again (shape, place, storage,
hours, project; the launch form prefilled with the image, ports, env NAMES and readiness rule —
never an env value), listed in `/cluster template list` and the App Home, per person or shared
with a team. A project rides a quote to its request and cluster, splits `/cluster spend`, is a
column of the audit export, and its monthly budget is judged like a team's. The ports a launch
asked for come with a ready `ssh -L` line, in the owner's DM only."""

import asyncio
import copy
import csv
import io
import json

import sqlalchemy as sa

from bot.domain.models import RequestStatus
from bot.slack.blocks.launch_modal import (
    FIELD_ENV,
    FIELD_IDLE_DONE,
    FIELD_IDLE_MINUTES,
    FIELD_IMAGE,
    FIELD_PORTS,
)
from bot.slack.ids import Action
from tests.e2e.harness import ALICE, BOB, CAROL, DAVE, bot
from tests.e2e.test_policy import policy
from tests.e2e.test_readiness import readiness

SECRET_VALUE = "hf_TOPSECRET_9f8e7d"


def workload(**extra):
    return {FIELD_ENV: {FIELD_ENV: f"HF_TOKEN={SECRET_VALUE}\nMALLOC_ARENA_MAX=1"},
            FIELD_PORTS: {FIELD_PORTS: "8000/http, 22/tcp, 80/http"},
            FIELD_IMAGE: {FIELD_IMAGE: "vllm/vllm-openai:latest"},
            FIELD_IDLE_MINUTES: {FIELD_IDLE_MINUTES: "45"},
            FIELD_IDLE_DONE: {FIELD_IDLE_DONE: "Training completed"},
            **readiness("Uvicorn running"), **extra}


async def new_requests(h, before):
    """The requests made since `before` (their ids): the store's order is not the clock's."""
    return [r for r in await h.requests_in_db() if r.id not in before]


async def launched(h, text, *, user=ALICE, values=None):
    before = {r.id for r in await h.requests_in_db()}
    card = await h.request(quote_text=text, user=user, values=values)
    await h.click(card, Action.APPROVE, user=BOB)
    [request] = await new_requests(h, before)
    assert request.status is RequestStatus.LAUNCHED and request.cluster_id is not None
    await h.advance(60)
    return request


def field(view, block_id):
    [block] = [b for b in view["blocks"] if b.get("block_id") == block_id]
    return block["element"].get("initial_value", "")


def said(h, user, text):
    return text in h.text_of(h.slack.ephemerals(user)[-1])


async def test_a_template_round_trips_through_quote_form_and_home_never_keeping_a_secret(
        tmp_path):
    async with bot(tmp_path) as h:
        request = await launched(h, "quote h100x8 nodes=2 storage=500 hours=12 project=llama",
                                 values=workload())
        cluster_id = request.cluster_id
        assert (await h.record(cluster_id)).project == "llama"  # request → launch → cluster
        assert request.project == "llama"

        await h.slash(f"template save serve {cluster_id}")
        saved = h.text_of(h.slack.ephemerals(ALICE)[-1])
        assert "Saved `serve`" in saved and "HF_TOKEN" in saved

        # Nothing of the env value anywhere a template lives: the table, the answers, Home.
        async with h.rt.db.transaction() as repos:
            stored = await repos.session.execute(sa.text("SELECT settings FROM templates"))
            raw = json.dumps([row[0] for row in stored])
        assert "HF_TOKEN" in raw and SECRET_VALUE not in raw

        await h.slash("template list")
        listed = h.text_of(h.slack.ephemerals(ALICE)[-1])
        assert "`serve`" in listed and "project" in listed and "12 h" in listed
        await h.requests.app_home_opened(ALICE)
        await h.rt.settle()
        home = json.dumps(h.slack.home(ALICE))
        assert "Your templates" in home and "serve" in home and SECRET_VALUE not in home

        # Quote from it: the same plan, an option overriding it, the form prefilled.
        card = await h.quote("quote template=serve hours=6")
        async with h.rt.db.transaction() as repos:
            quote_id = next(e.subject_id for e in await repos.audit.list(limit=20)
                            if e.action == "quote" and e.outcome == "ok")
            quote = await repos.quotes.get(quote_id)
        spec = quote.spec
        assert (spec.shape.nodes, spec.shape.gpus_per_node, spec.storage_gb) == (2, 8, 500)
        assert (spec.planned_hours, spec.project, spec.location) == (6, "llama", "us-tx")
        await h.click(card, Action.QUOTE_REQUEST_LAUNCH, user=ALICE)
        form = h.slack.last_view(ALICE)
        text = json.dumps(form)
        assert "vllm/vllm-openai:latest" in text and "8000/http" in text
        assert "Uvicorn running" in text
        # The idle rule comes along too (bot/domain/idle.py).
        assert field(form, FIELD_IDLE_MINUTES) == "45"
        assert "Training completed" in field(form, FIELD_IDLE_DONE)
        assert "HF_TOKEN=" in text and SECRET_VALUE not in text  # the name, to fill in again

        # A request from it carries the project again.
        before = {r.id for r in await h.requests_in_db()}
        await h.submit(form, values={FIELD_ENV: {FIELD_ENV: "HF_TOKEN=other"}})
        [newest] = await new_requests(h, before)
        assert newest.project == "llama" and newest.workload.ports == ("8000/http", "22/tcp",
                                                                       "80/http")

        await h.slash("template delete serve")
        assert said(h, ALICE, "deleted")
        await h.slash("template list")
        assert said(h, ALICE, "No templates yet")


async def test_bad_template_input_names_the_bad_part_and_changes_nothing(tmp_path):
    async with bot(tmp_path) as h:
        request = await launched(h, "quote h100x8 nodes=2")
        cluster_id = request.cluster_id
        await h.slash(f"template save serve {cluster_id}")

        async def refused(text, *words, user=ALICE):
            async with h.rt.db.transaction() as repos:
                before = await repos.templates.in_scopes([f"user:{user}", "team:*"])
            reply = await h.slash(text, user=user)
            shown = str(reply.body) + (h.text_of(h.slack.ephemerals(user)[-1])
                                       if h.slack.ephemerals(user) else "")
            for word in words:
                assert word in shown, (text, shown)
            async with h.rt.db.transaction() as repos:
                assert await repos.templates.in_scopes([f"user:{user}", "team:*"]) == before

        await refused(f"template save serve {cluster_id}", "`serve` already exists")
        await refused("template save", "needs a name")
        await refused(f"template save {'x' * 41} {cluster_id}", "41 characters", "at most 40")
        await refused(f"template save Bad!Name {cluster_id}", "Bad!Name")
        await refused("template save other clu_nope", "clu_nope")
        await refused("template save other", "Which cluster")
        await refused("quote template=nosuch", "nosuch", "template list")
        await refused("template delete nosuch", "nosuch")
        await refused(f"template save other {cluster_id} team=ghosts", "ghosts")
        # Somebody else's cluster: its owner or an approver saves it.
        await refused(f"template save theirs {cluster_id}", "owner or an approver", user=DAVE)
        await refused("template delete serve", "serve", user=DAVE)  # not visible to DAVE
        async with h.rt.db.transaction() as repos:
            audit = await repos.audit.list(limit=100)
        assert [e for e in audit if e.action == "save_template" and e.outcome == "refused"]


async def test_a_shared_template_is_seen_by_the_team_only(tmp_path):
    team = {"research": {"members": [ALICE, CAROL], "monthly": 100000}}
    async with bot(tmp_path, policy=policy(budgets={"teams": team})) as h:
        request = await launched(h, "quote h100x8 nodes=2")
        await h.slash(f"template save team-run {request.cluster_id} shared")
        assert said(h, ALICE, "shared with team research")
        await h.slash(f"template save mine {request.cluster_id}")
        await h.slash("template list", user=CAROL)
        carol = h.text_of(h.slack.ephemerals(CAROL)[-1])
        assert "team-run" in carol and "`mine`" not in carol
        await h.slash("template list", user=DAVE)
        assert said(h, DAVE, "No templates yet")
        await h.slash("quote template=team-run", user=DAVE)
        assert said(h, DAVE, "team-run")
        # CAROL quotes from it; only the one who saved it (or an admin) deletes it.
        card = await h.quote("quote template=team-run", user=CAROL)
        assert Action.QUOTE_REQUEST_LAUNCH in h.text_of(card)
        await h.slash("template delete team-run", user=CAROL)
        assert said(h, CAROL, "Only")
        await h.requests.app_home_opened(CAROL)
        await h.rt.settle()
        assert "team-run" in json.dumps(h.slack.home(CAROL))


async def test_projects_split_spend_and_the_export_and_an_unknown_one_is_refused(tmp_path):
    projects = {"llama": {"monthly_budget": 100000}, "vision": {}}
    async with bot(tmp_path, policy=policy(projects=projects)) as h:
        first = await launched(h, "quote h100x8 nodes=2 project=llama")
        await launched(h, "quote h100x8 nodes=2 project=vision", user=DAVE)
        await launched(h, "quote h100x8 nodes=2")
        await h.advance(3600)

        before = len(await h.requests_in_db())
        await h.slash("quote h100x8 nodes=2 project=ghost")
        assert said(h, ALICE, "Unknown project `ghost`") and said(h, ALICE, "`llama`")
        assert len(await h.requests_in_db()) == before

        await h.slash("spend by=project", user=BOB)
        report = h.text_of(h.slack.ephemerals(BOB)[-1])
        assert "By project" in report
        assert "`llama`" in report and "`vision`" in report and "no project" in report
        report_by_owner = h.rt.services.clusters
        full = await report_by_owner.spend(month=None)
        by_project = dict(full.by_project)
        assert set(by_project) == {"llama", "vision", None}
        assert sum(by_project.values()) == full.total_cents
        chart = [u for u in h.slack.uploads.shared_in(h.slack.dm_channel(BOB))
                 if u.filename.startswith("spend-")]
        assert chart and "by project" in chart[-1].title

        await h.slash("audit export", user=BOB)
        [upload] = [u for u in h.slack.uploads.shared_in(h.slack.dm_channel(BOB))
                    if u.filename.endswith(".csv")]
        rows = list(csv.DictReader(io.StringIO(upload.data.decode())))
        assert "project" in rows[0]
        tagged = {(r["subject_id"], r["project"]) for r in rows if r["project"]}
        assert (first.id, "llama") in tagged and (first.cluster_id, "llama") in tagged
        assert any(p == "vision" for _, p in tagged)


async def test_a_project_budget_refuses_and_asks_like_a_team_budget(tmp_path):
    # h100x8 nodes=2 holds $874.02 of the month (test_budgets.py): $1,500 fits one, not two,
    # whoever spends it.
    projects = {"llama": {"monthly_budget": 1500}}
    async with bot(tmp_path, policy=policy(projects=projects)) as h:
        one = copy.deepcopy(await h.request(quote_text="quote h100x8 nodes=2 project=llama"))
        two = copy.deepcopy(await h.request(quote_text="quote h100x8 nodes=2 project=llama",
                                            user=DAVE))
        other = copy.deepcopy(await h.request(quote_text="quote h100x8 nodes=2", user=DAVE))
        await h.click(one, Action.APPROVE, user=BOB)
        await h.click(two, Action.APPROVE, user=BOB)
        await h.click(other, Action.APPROVE, user=BOB)
        statuses = {r.requester_id + (r.project or ""): r.status
                    for r in await h.requests_in_db()}
        assert statuses == {ALICE + "llama": RequestStatus.LAUNCHED,
                            DAVE + "llama": RequestStatus.FAILED,
                            DAVE: RequestStatus.LAUNCHED}
        [refusal] = [m for m in h.slack.ephemerals(BOB) if "Not approved" in h.text_of(m)]
        assert "Project llama: $1,748.04 of $1,500.00" in h.text_of(refusal)

        # Asked again now: refused when requested, with the numbers, on the quote card too.
        await h.slash("quote h100x8 nodes=2 project=llama", user=CAROL)
        card = h.last_ephemeral(CAROL, containing="Project llama")
        assert "$1,748.04 of $1,500.00" in h.text_of(card)
        assert Action.QUOTE_REQUEST_LAUNCH not in h.text_of(card)  # nothing to request

    # With overrides by admins the same rule goes to an admin instead of a refusal.
    overrides = policy(projects=projects, overrides="admins")
    (tmp_path / "o").mkdir()
    async with bot(tmp_path / "o", policy=overrides) as h:
        first = copy.deepcopy(await h.request(quote_text="quote h100x8 nodes=2 project=llama"))
        await h.click(first, Action.APPROVE, user=BOB)
        card = await h.request(quote_text="quote h100x8 nodes=2 project=llama", user=DAVE)
        async def daves():
            [found] = [r for r in await h.requests_in_db() if r.requester_id == DAVE]
            return found
        newest = await daves()
        assert newest.status is RequestStatus.PENDING
        assert newest.override_rule is not None and "Project llama" in newest.override_rule
        await h.click(card, Action.APPROVE, user=BOB)
        assert (await daves()).status is RequestStatus.PENDING  # BOB is not an admin


async def test_ports_come_with_ssh_tunnels_in_the_owners_dm_only(tmp_path):
    async with bot(tmp_path) as h:
        request = await launched(h, "quote h100x8 nodes=2", values=workload())
        cluster_id = request.cluster_id
        primary = h.sim.engine.get_cluster(cluster_id).connections.primary.ssh
        tunnel = (f"ssh -L 8000:localhost:8000 -N -p {primary.port} "
                  f"{primary.user}@{primary.host}")
        [ready] = [m for m in h.slack.dms(ALICE) if "is ready" in h.text_of(m)]
        text = h.text_of(ready)
        assert tunnel in text
        assert "ssh -L 10080:localhost:80 " in text  # a privileged port, from a free one
        assert "localhost:22 " not in text  # SSH itself needs no tunnel

        first = len(h.slack.dms(ALICE))
        await h.slash(f"connect {cluster_id}", user=BOB)
        again = h.slack.dms(ALICE)[first:]
        assert again and tunnel in h.text_of(again[-1])
        # Nobody else sees a tunnel: not BOB who asked, not any channel.
        assert not [m for m in h.slack.dms(BOB) + h.slack.ephemerals(BOB)
                    if "ssh -L" in h.text_of(m)]
        assert "ssh -L" not in h.channel_payloads()

        # A launch that asked for no ports gets no port lines.
        plain = await launched(h, "quote h100x8 nodes=2")
        [bare] = [m for m in h.slack.dms(ALICE)
                  if f"Cluster {plain.cluster_id} is ready" in h.text_of(m)]
        assert "ssh -L" not in h.text_of(bare) and "*Ports*" not in h.text_of(bare)



async def test_a_relaunch_on_the_kept_volume_keeps_the_project(tmp_path):
    async with bot(tmp_path) as h:
        request = await launched(h, "quote h100x8 nodes=2 storage=100 project=llama")
        cluster_id = request.cluster_id
        await h.slash(f"terminate {cluster_id}")
        await h.click(h.last_ephemeral(ALICE, containing=Action.TERMINATE), Action.TERMINATE,
                      user=ALICE)
        await h.advance(120)
        cmd, _ = await h.rt.services.volumes.relaunch(cluster_id=cluster_id)
        assert cmd.project == "llama" and cmd.volume_id == (await h.record(cluster_id)).volume_id


async def test_approvals_at_once_on_one_project_budget_take_turns(tmp_path, database_url):
    # Four people's requests on one project, approved at the same instant: $1,800 fits two
    # ($874.02 each), on PostgreSQL (a lock per budget) as on SQLite.
    projects = {"llama": {"monthly_budget": 1800}}
    async with bot(tmp_path, policy=policy(projects=projects),
                   database_url=database_url) as h:
        cards = [copy.deepcopy(await h.request(
            quote_text="quote h100x8 nodes=2 project=llama", user=who))
            for who in (ALICE, DAVE, ALICE, DAVE)]
        await asyncio.gather(*(h.requests.click(card, Action.APPROVE, user_id=BOB)
                               for card in cards))
        await h.rt.settle()
        statuses = sorted(r.status.value for r in await h.requests_in_db())
        assert statuses == ["failed", "failed", "launched", "launched"]
        assert len(h.sim.engine.list_clusters()) == 2
        failed = [r for r in await h.requests_in_db() if r.status is RequestStatus.FAILED]
        assert all("Project llama: $2,622.06 of $1,800.00" in r.last_error for r in failed)
