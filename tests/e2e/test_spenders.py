"""Who may spend (issue 18, item 6): the policy's requesters, guests, and the installed
workspace — checked where money is committed (a launch request, an extension), answered
privately with the rule's name, audited, and nothing requested."""

import logging

import yaml

from bot.slack.ids import Action
from devslack.models import SlackUser
from tests.e2e.harness import ALICE, APPROVALS, BOB, CAROL, DAVE, LEADS, bot
from tests.e2e.test_extensions import ask, audit_of, planned
from tests.e2e.test_volumes import attached_volume, terminated

BASE = {"approvals_channel": APPROVALS, "approvers": {"users": [BOB], "group": LEADS}}


def policy(**extra: object) -> str:
    return yaml.safe_dump({**BASE, **extra})


async def try_request(h, user: str) -> str:
    """Quote, and as far as it goes: Request launch, submit the form. Someone who may not
    request is told on the quote card (no Request launch: "card"), or, pressing an older card,
    before the form ("press"); else the form is submitted ("form")."""
    await h.slash("quote h100x8 nodes=2", user=user)
    card = h.last_ephemeral(user, containing=Action.QUOTE_DISCARD)
    if Action.QUOTE_REQUEST_LAUNCH not in h.text_of(card):
        return "card"
    return await press_request(h, card, user)


async def press_request(h, card, user: str) -> str:
    opened = len(h.slack.calls_to("views.open"))
    await h.click(card, Action.QUOTE_REQUEST_LAUNCH, user=user)
    if len(h.slack.calls_to("views.open")) == opened:
        return "press"
    modal = h.slack.last_view(user)
    assert modal is not None
    await h.submit(modal, user=user)
    return "form"


def last_said(h, user: str) -> str:
    """A refused form submission is answered where a view's answer goes: the App Home's
    Messages tab (a post to the user's id; bot/slack/errors.py), or privately in the channel."""
    return "\n".join(h.text_of(m) for m in [*h.slack.dms(user), *h.slack.ephemerals(user)])


def guest(user_id: str, *, ultra: bool = False) -> SlackUser:
    return SlackUser(user_id, user_id.lower(), is_restricted=not ultra, is_ultra_restricted=ultra)


async def test_a_guest_is_refused_unless_the_policy_allows_guests(tmp_path):
    async with bot(tmp_path, policy=policy()) as h:
        h.slack.users[DAVE] = guest(DAVE, ultra=True)
        assert await try_request(h, DAVE) == "card"  # no form to fill in (issue 27.10)
        assert await h.requests_in_db() == []
        assert "allow_guests" in last_said(h, DAVE) and "Guest" in last_said(h, DAVE)
        await h.request(user=ALICE)  # a full member still may
        assert len(await h.requests_in_db()) == 1
    (tmp_path / "allowed").mkdir()
    async with bot(tmp_path / "allowed", policy=policy(allow_guests=True)) as h:
        h.slack.users[DAVE] = guest(DAVE)
        await h.request(user=DAVE)
        assert [r.requester_id for r in await h.requests_in_db()] == [DAVE]


async def test_only_the_listed_requesters_their_groups_and_the_approvers_may_request(tmp_path):
    async with bot(tmp_path, policy=policy(requesters={"users": [DAVE], "groups": ["S0ML"]})) \
            as h:
        h.slack.usergroups["S0ML"] = [ALICE]
        await h.request(user=DAVE)  # listed by id
        await h.request(user=ALICE)  # through the S0ML group
        await h.request(user=CAROL)  # an approver (the leads group) is a requester by right
        h.slack.usergroups["S0ML"] = []
        await h.advance(6 * 60)  # the group's cached members expire: Alice is out
        assert await try_request(h, ALICE) == "card"
        assert sorted(r.requester_id for r in await h.requests_in_db()) == sorted(
            [DAVE, ALICE, CAROL])
        assert "requesters" in last_said(h, ALICE)


async def test_a_request_from_another_workspace_is_refused_and_logged(tmp_path, caplog):
    """Refused at its first step, the quote (every kind of request: tests/e2e/test_workspace.py)."""
    caplog.set_level(logging.WARNING)
    async with bot(tmp_path, policy=policy()) as h:
        h.requests.team_id = "T0ELSEWHERE"
        await h.slash("quote h100x8 nodes=2", user=ALICE)
        assert await h.requests_in_db() == []
        assert "installed in" in h.last_ephemeral(ALICE, containing="T0ELSEWHERE").text
        [refused] = await audit_of(h, "workspace", "refused")
        assert refused.actor_id == ALICE and refused.team_id == "T0ELSEWHERE"
        assert any("T0ELSEWHERE" in r.getMessage() and "installed" in r.getMessage()
                   for r in caplog.records)
        h.requests.team_id = h.slack.team_id
        await h.request(user=ALICE)
        assert len(await h.requests_in_db()) == 1


async def test_an_extension_is_spending_too(tmp_path):
    async with bot(tmp_path, policy=policy(requesters={"users": [ALICE]})) as h:
        cluster_id = await planned(h)
        # Alice's rights are withdrawn (a new policy): she can't extend her own cluster now.
        people = h.rt.services.people
        people.policies = people.policies.model_copy(update={"default": people.policy.model_copy(
            update={"requester_ids": frozenset({DAVE})})})
        preview = await ask(h, cluster_id, 1)
        assert "requesters" in h.text_of(preview)
        assert (await h.record(cluster_id)).lifetime_hours == 4
        assert len(await audit_of(h, "extend", "refused")) == 1


async def test_when_slack_cant_say_whether_someone_is_a_guest_nothing_is_requested(tmp_path):
    async with bot(tmp_path, policy=policy()) as h:
        h.slack.fail_next("users.info", error="internal_error", count=1)
        assert await try_request(h, ALICE) == "card"
        assert await h.requests_in_db() == []
        assert "try again" in last_said(h, ALICE)
        await h.request(user=ALICE)  # Slack answers again: she may
        assert len(await h.requests_in_db()) == 1


async def test_growing_a_volume_is_spending_too(tmp_path):
    """A bigger volume bills more every month: the owner must still be allowed to spend."""
    async with bot(tmp_path, policy=policy()) as h:
        cluster_id, volume_id = await attached_volume(h)
        await terminated(h, cluster_id)
        h.slack.users[ALICE] = guest(ALICE)
        h.clock.advance(6 * 60)  # what Slack said of her before is stale now
        await h.slash(f"volume grow {volume_id} 2000", user=ALICE)
        assert "allow_guests" in last_said(h, ALICE)
        assert h.sim.engine.get_volume(volume_id).size_gb == 1000
        [refused] = await audit_of(h, "grow_volume", "refused")
        assert refused.actor_id == ALICE and "allow_guests" in (refused.detail or "")
        await h.slash(f"volume grow {volume_id} 2000", user=BOB)  # an approver, a full member
        assert h.sim.engine.get_volume(volume_id).size_gb == 2000
