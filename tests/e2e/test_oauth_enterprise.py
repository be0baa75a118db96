"""Issue 29: an Enterprise Grid organization installs the app once, org-wide, through the OAuth
flow; that one installation serves every workspace of the organization its admins gave the app
to, with its one token, and the workspace rule is "this installation" for every interaction.

The organization E0ORG has given the app to T0ONE (Dave, #random) and T0TWO (Alice, Bob, Carol,
#general, #approvals). Requests carry `enterprise_id` and `is_enterprise_install` as Slack sends
them for an org-wide app. A Slack Connect guest whose own workspace is outside the org, a
workspace of the org the app was not given, and a workspace of no org are refused before any
listener; a workspace given later (`team_access_granted`) is served, until taken back.
"""

from __future__ import annotations

import logging

import sqlalchemy as sa

from bot.slack.ids import Action
from devslack.models import SlackUser
from devslack.requests import SlackRequests
from tests.e2e.harness import ALICE, DAVE, SECRET
from tests.e2e.test_oauth_install import ONE, TWO, install, oauth_bot
from tests.e2e.test_oauth_tokens import PSEUDO

ORG = "E0ORG"
THREE = "T0THREE"  # of the organization; the app is given to it later
OUTSIDE = "T0OUT"  # of no organization: a Slack Connect guest's own workspace
GUEST = "U0GUEST"
QUOTE = "quote h100x8 nodes=2"


def of_org(h, team: str, **more) -> SlackRequests:
    """Requests from `team`, a workspace of E0ORG, where the app is installed org-wide."""
    return SlackRequests(events_url=h.requests.events_url, signing_secret=SECRET, slack=h.slack,
                         team_id=team, enterprise_id=ORG, enterprise_install=True, **more)


async def installed_org_wide(h) -> str:
    """Install in E0ORG (given to T0ONE and T0TWO); returns the installation's one token."""
    h.slack.oauth.workspaces[ORG] = [ONE, TWO]
    status, page = await install(h, enterprise=ORG)
    assert status == 200 and "organization" in page, page
    [token] = h.slack.oauth.tokens
    return token


async def test_an_org_wide_install_answers_two_workspaces_of_the_enterprise_with_its_token(
        tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    async with oauth_bot(tmp_path) as h:
        token = await installed_org_wide(h)
        [found] = await h.rt.oauth.installations.all()
        assert (found.key, found.org_wide, found.team_id) == (ORG, True, None)
        assert found.workspaces == {ONE, TWO}  # auth.teams.list, asked with its own token
        first = len(h.slack.calls)

        async with of_org(h, ONE) as dave:  # T0ONE: a Home and a quote
            await dave.app_home_opened(DAVE)
            await dave.slash(text=QUOTE, user_id=DAVE, channel_id="C0RANDOM")
        await h.rt.settle()
        assert h.slack.home(DAVE) is not None
        assert [m for m in h.slack.ephemerals(DAVE)
                if Action.QUOTE_REQUEST_LAUNCH in h.text_of(m)]

        home, h.requests = h.requests, of_org(h, TWO)  # T0TWO: a cluster's whole life
        async with h.requests:
            cluster_id = await h.running_cluster(QUOTE)  # asked, approved by Bob, booted
            await h.first_reminder(cluster_id)  # a sweep's DM, outside any request
        h.requests = home

        calls = [c for c in h.slack.calls[first:] if c.method not in PSEUDO]
        assert {"views.publish", "chat.postMessage", "chat.update"} <= {c.method for c in calls}
        wrong = [(c.method, c.token) for c in calls if c.token != token]
        assert wrong == []  # every call, in both workspaces, with the installation's token
        assert all(c.response.get("ok") for c in calls), [
            (c.method, c.response) for c in calls if not c.response.get("ok")]
        assert h.slack.dms(ALICE)
        assert not [r for r in caplog.records if "refused a" in r.getMessage()]


async def test_a_request_from_outside_the_org_is_refused_and_a_workspace_given_later_served(
        tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    async with oauth_bot(tmp_path) as h:
        await installed_org_wide(h)
        home, h.requests = h.requests, of_org(h, TWO)
        async with h.requests:
            card = await h.request(quote_text=QUOTE)  # Alice's request, on its way to Bob
        h.requests = home

        # A Slack Connect guest whose own workspace is outside the org clicks on the approval
        # card in T0TWO's shared #approvals: refused before any listener, told why privately.
        h.slack.users[GUEST] = SlackUser(GUEST, "gus", "Gus Guest")
        async with of_org(h, TWO, user_team_id=OUTSIDE) as guest:
            await guest.click(card, Action.APPROVE, user_id=GUEST)
        await h.rt.settle()
        assert (await h.requests_in_db())[-1].status.value == "pending"
        told = h.last_ephemeral(GUEST, containing="workspaces of the organization")
        assert OUTSIDE in h.text_of(told)

        # A workspace of the org the app was not given: refused; given, served; taken back,
        # refused again. Slack's events come from the organization, signed.
        async with of_org(h, THREE) as three:
            assert "workspaces of the organization" in (
                await three.slash(text=QUOTE, user_id=DAVE)).content["text"]
            assert (await three.event({"type": "team_access_granted",
                                       "team_ids": [THREE]})).status == 200
            served = await three.slash(text=QUOTE, user_id=DAVE)
            await h.rt.settle()
            assert "workspaces of the organization" not in str(served.content)
            assert [m for m in h.slack.ephemerals(DAVE)
                    if Action.QUOTE_REQUEST_LAUNCH in h.text_of(m)]
            await three.event({"type": "team_access_revoked", "team_ids": [THREE]})
            assert "workspaces of the organization" in (
                await three.slash(text=QUOTE, user_id=DAVE)).content["text"]

        # A workspace of no organization at all: no installation serves it; nothing is called.
        before = len(h.slack.calls)
        async with SlackRequests(events_url=h.requests.events_url, signing_secret=SECRET,
                                 slack=h.slack, team_id=OUTSIDE) as stranger:
            await stranger.slash(text=QUOTE, user_id=GUEST)
        await h.rt.settle()
        assert [c.method for c in h.slack.calls[before:] if c.method not in PSEUDO] == []

        async with h.rt.db.engine.connect() as conn:
            refused = (await conn.execute(sa.text(
                "SELECT count(*) FROM audit WHERE action = 'workspace' AND outcome = 'refused'"
            ))).scalar_one()
        assert refused == 3  # the guest's click, T0THREE's two commands
        warned = [r for r in caplog.records if "refused a" in r.getMessage()]
        assert len(warned) == refused
