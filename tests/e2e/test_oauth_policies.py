"""Issue 29, configuration per installation: the policy file's `installations:` gives a workspace
(T…) or an Enterprise organization (E…) its own approvals channel and approvers (any section of
the policy), the rest inherited from the top level.

Installed through the OAuth flow in two workspaces, each workspace's launch requests go to its
own approvals channel, and only its own approvers decide them: an approver of the other
workspace is refused privately and nothing changes. Installed org-wide, a workspace with a
policy of its own uses it and the organization's other workspaces use the organization's. The
single-token mode reads the same file: a workspace it doesn't serve changes nothing there.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from bot.slack.ids import Action
from devslack.models import Message
from devslack.requests import SlackRequests
from tests.e2e.harness import ALICE, APPROVALS, BOB, CAROL, DAVE, GENERAL, SECRET, Harness, bot
from tests.e2e.test_oauth_enterprise import ORG, installed_org_wide, of_org
from tests.e2e.test_oauth_install import ONE, TWO, install, oauth_bot

ONE_APPROVALS, TWO_APPROVALS, ORG_APPROVALS = "C0ONEAPPROVALS", "C0TWOAPPROVALS", "C0ORGAPPROVALS"
REFUSED = "Only the configured approvers"
APPROVED = ("approved", "launched")  # approved, and launched by the time it settled

POLICY = f"""\
approvals_channel: {APPROVALS}
approvers:
  users: [{BOB}, {DAVE}]
installations:
  {ONE}:
    approvals_channel: {ONE_APPROVALS}
    approvers:
      users: [{BOB}]
  {TWO}:
    approvals_channel: {TWO_APPROVALS}
    approvers:
      users: [{DAVE}]
"""
ORG_POLICY = f"""\
approvals_channel: {APPROVALS}
approvers:
  users: [{CAROL}]
installations:
  {ORG}:
    approvals_channel: {ORG_APPROVALS}
    approvers:
      users: [{BOB}]
  {TWO}:
    approvals_channel: {TWO_APPROVALS}
    approvers:
      users: [{DAVE}]
"""


def in_workspace(h: Harness, team: str) -> SlackRequests:
    return SlackRequests(events_url=h.requests.events_url, signing_secret=SECRET, slack=h.slack,
                         team_id=team)


async def ask(h: Harness, requests: SlackRequests, user: str, channel: str) -> Message:
    """`user` quotes, requests a launch and submits the form from `requests`' workspace; the
    approval card, which must be in `channel`."""
    home, h.requests = h.requests, requests
    try:
        async with requests:
            before = len(h.slack.messages(channel))
            card = await h.quote("quote h100x8 nodes=2", user=user)
            await h.click(card, Action.QUOTE_REQUEST_LAUNCH, user=user)
            form = h.slack.last_view(user)
            assert form is not None
            assert (await h.submit(form, user=user)).status == 200
    finally:
        h.requests = home
    cards = h.slack.messages(channel)[before:]
    assert len(cards) == 1, [m.channel for m in h.slack.all_messages()[-5:]]
    return cards[0]


async def decide(h: Harness, requests: SlackRequests, card: Message, user: str) -> str:
    """`user` presses Approve on `card` from `requests`' workspace; the request's status."""
    async with requests:
        await requests.click(card, Action.APPROVE, user_id=user)
    await h.rt.settle()
    [request] = [r for r in await h.requests_in_db() if r.id in h.text_of(card)]
    return request.status.value


async def test_two_workspaces_each_ask_their_own_approvers_in_their_own_channel(tmp_path):
    async with oauth_bot(tmp_path, policy=POLICY) as h:
        for channel, name in ((ONE_APPROVALS, "one-approvals"), (TWO_APPROVALS, "two-approvals")):
            h.slack.add_channel(name, channel)
        assert (await install(h, team=ONE))[0] == 200
        assert (await install(h, team=TWO))[0] == 200
        tokens = {g.team_id: t for t, g in h.slack.oauth.tokens.items()}

        one = await ask(h, in_workspace(h, ONE), ALICE, ONE_APPROVALS)
        two = await ask(h, in_workspace(h, TWO), CAROL, TWO_APPROVALS)
        assert h.slack.messages(APPROVALS) == []  # the top level's channel: neither
        posts = [c for c in h.slack.calls if c.method == "chat.postMessage"
                 and c.args.get("channel") in (ONE_APPROVALS, TWO_APPROVALS)]
        assert {(c.args["channel"], c.token) for c in posts} == {
            (ONE_APPROVALS, tokens[ONE]), (TWO_APPROVALS, tokens[TWO])}
        # Each is its installation's from now on, for what a sweep posts there.
        installations = h.rt.oauth.installations
        assert [await installations.route(c) for c in (ONE_APPROVALS, TWO_APPROVALS)] == [ONE, TWO]

        # Dave approves for T0TWO, not for T0ONE: refused privately, nothing recorded.
        assert await decide(h, in_workspace(h, TWO), one, DAVE) == "pending"
        assert REFUSED in h.text_of(h.last_ephemeral(DAVE, containing=REFUSED))
        assert await installations.route(ONE_APPROVALS) == ONE  # not learned from his click
        asked = await h.requests_in_db()
        async with h.rt.db.transaction() as repos:
            assert [a for r in asked for a in await repos.approvals.for_request(r.id)] == []
        assert await decide(h, in_workspace(h, ONE), two, BOB) == "pending"
        assert REFUSED in h.text_of(h.last_ephemeral(BOB, containing=REFUSED))

        assert await decide(h, in_workspace(h, ONE), one, BOB) in APPROVED
        assert await decide(h, in_workspace(h, TWO), two, DAVE) in APPROVED

        # Nor may the other workspace's approver act on its cluster.
        [cluster] = [r.cluster_id for r in await h.requests_in_db() if r.id in h.text_of(one)]
        assert cluster is not None
        async with in_workspace(h, TWO) as dave:
            await dave.slash(text=f"terminate {cluster}", user_id=DAVE, channel_id=GENERAL)
        await h.rt.settle()
        assert cluster in h.text_of(h.last_ephemeral(DAVE, containing="Only the owner"))


async def test_an_org_wide_install_uses_a_workspaces_own_policy_else_the_orgs(tmp_path):
    async with oauth_bot(tmp_path, policy=ORG_POLICY) as h:
        for channel, name in ((ORG_APPROVALS, "org-approvals"), (TWO_APPROVALS, "two-approvals")):
            h.slack.add_channel(name, channel)
        await installed_org_wide(h)

        one = await ask(h, of_org(h, ONE), DAVE, ORG_APPROVALS)  # T0ONE: the org's policy
        two = await ask(h, of_org(h, TWO), ALICE, TWO_APPROVALS)  # T0TWO: its own
        assert h.slack.messages(APPROVALS) == []

        assert await decide(h, of_org(h, TWO), two, BOB) == "pending"  # the org's approver
        assert await decide(h, of_org(h, ONE), one, CAROL) == "pending"  # the top level's
        assert await decide(h, of_org(h, TWO), two, DAVE) in APPROVED
        assert await decide(h, of_org(h, ONE), one, BOB) in APPROVED


async def test_the_single_token_mode_reads_the_same_file(tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    other = "T0ELSEWHERE"  # a workspace this token doesn't serve: its policy changes nothing
    policy = POLICY.replace(ONE, other).replace(TWO, "T0ALSOELSE")
    async with bot(tmp_path, policy=policy) as h:
        warned = [r.getMessage() for r in caplog.records if "never applies" in r.getMessage()]
        assert [w.split(" never")[0].rsplit(".", 1)[1] for w in warned] == ["T0ALSOELSE", other]
        card = await h.request()
        assert card.channel == APPROVALS
        await h.click(card, Action.APPROVE, user=DAVE)  # a top-level approver
        assert (await h.requests_in_db())[-1].status.value in APPROVED

    serving = h.slack.team_id  # the token's own workspace, given a policy of its own
    (tmp_path / "own").mkdir()
    async with bot(tmp_path / "own", policy=POLICY.replace(ONE, serving)) as h:
        h.slack.add_channel("one-approvals", ONE_APPROVALS)
        card = await ask(h, h.requests, ALICE, ONE_APPROVALS)
        await h.click(card, Action.APPROVE, user=DAVE)
        assert (await h.requests_in_db())[-1].status.value == "pending"
        await h.click(card, Action.APPROVE, user=BOB)
        [request] = await h.requests_in_db()
        assert request.status.value in APPROVED and request.cluster_id is not None

        # The cluster keeps where it came from: a sweep's notice goes to that channel too.
        await h.advance(60)
        record = await h.record(request.cluster_id)
        assert (record.status.value, record.team_id) == ("running", serving)
        ready = h.sim.engine.get_cluster(record.id).ready_at
        assert ready is not None
        await h.sim_admin("account", {"balanceCents": 0})
        h.clock.set(ready + timedelta(hours=1, seconds=5))  # an hour AI Reserve can't charge
        await h.rt.services.watching.sync_live()
        await h.rt.settle()
        unpaid = [m.channel for m in h.slack.all_messages()
                  if "could not charge the account" in h.text_of(m) and m.channel[0] == "C"]
        assert unpaid == [ONE_APPROVALS]
