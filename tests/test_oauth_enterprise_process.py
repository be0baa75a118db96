"""Issue 29, real processes: two bot replicas (`python -m bot serve`, one SQLite database) serve
one Enterprise Grid organization installed org-wide through the OAuth flow on one of them.

T0ONE's Dave is served by replica 1; in T0TWO Alice asks for a cluster on replica 2 and Bob
approves it on replica 1 — every Web API call of both processes carries the organization's one
token. A Slack Connect guest from outside the org is refused by replica 2's gate.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bot.slack.ids import Action
from devslack.models import SlackUser
from devslack.requests import SlackRequests
from tests import procs
from tests.e2e.harness import ALICE, BOB, DAVE, SECRET
from tests.e2e.test_oauth_enterprise import GUEST, ORG, OUTSIDE
from tests.e2e.test_oauth_install import ONE, TWO, install, oauth_env
from tests.e2e.test_oauth_tokens import PSEUDO
from tests.procs import wait_for

# Two replica processes that count what they post (tests/conftest.py).
pytestmark = pytest.mark.procs(lane="restarts")


def of_org(requests: SlackRequests, team: str, *, user_team: str | None = None) -> None:
    """`requests` speak for `team` of E0ORG, installed org-wide, from now on."""
    requests.team_id, requests.enterprise_id = team, ORG
    requests.enterprise_install, requests.user_team_id = True, user_team or team


async def test_two_replica_processes_serve_an_org_wide_install_with_its_one_token(tmp_path):
    async with procs.world(tmp_path) as w:
        env = oauth_env(w.slack)
        first, second = await w.bot(env=env), await w.bot(env=env)
        w.slack.oauth.workspaces[ORG] = [ONE, TWO]
        status, page = await install(SimpleNamespace(requests=first.requests, slack=w.slack),
                                     enterprise=ORG)
        assert status == 200 and "organization" in page, page
        [token] = w.slack.oauth.tokens
        since = len(w.slack.calls)

        async with SlackRequests(events_url=first.requests.events_url, signing_secret=SECRET,
                                 slack=w.slack) as dave:
            of_org(dave, ONE)
            await dave.app_home_opened(DAVE)
        await wait_for(lambda: w.slack.home(DAVE), what="Dave's Home (T0ONE, replica 1)")

        of_org(second.requests, TWO)
        card = await w.request_launch(second, user=ALICE)  # T0TWO, replica 2
        w.slack.users[GUEST] = SlackUser(GUEST, "gus", "Gus Guest")
        of_org(second.requests, TWO, user_team=OUTSIDE)  # a Slack Connect guest, replica 2
        await second.requests.click(card, Action.APPROVE, user_id=GUEST)
        told = await wait_for(lambda: [m for m in w.slack.ephemerals(GUEST)
                                       if "workspaces of the organization" in w.text_of(m)],
                              what="the guest told why not")
        assert OUTSIDE in w.text_of(told[-1])

        of_org(first.requests, TWO)
        await first.requests.click(card, Action.APPROVE, user_id=BOB)  # T0TWO, replica 1
        await wait_for(lambda: [c for c in w.slack.calls_to("chat.update")
                                if "Approved" in str(c.args)],
                       what="the card marked approved")

        calls = [c for c in w.slack.calls[since:] if c.method not in PSEUDO]
        assert {"views.publish", "chat.postMessage", "chat.update"} <= {c.method for c in calls}
        assert [(c.method, c.token) for c in calls if c.token != token] == []
        assert all(c.response.get("ok") for c in calls), [
            (c.method, c.response) for c in calls if not c.response.get("ok")]
        for bot in (first, second):
            assert "Traceback" not in bot.logs() and token not in bot.logs()
        assert "refused a block_actions" in second.logs()
