"""A request publishes only the App Homes it changes, and every Home at rest is a fresh one.

Three approvers (bob, dave, carol through the group), a rate that needs two of them; alice's
request goes through submission, two approvals, its launch, running and terminate. Counted at
FakeSlack: views.publish calls per person (bot/slack/audiences.py)."""

from collections import Counter

from bot.slack.blocks.home import home_payload
from bot.slack.ids import Action
from tests.e2e.harness import ALICE, BOB, CAROL, DAVE, GENERAL, Harness, bot, replicas
from tests.e2e.test_policy import policy

APPROVERS = (BOB, CAROL, DAVE)
THREE = policy(approvers={"users": [BOB, DAVE], "group": "S0LEADS"})


def published(h: Harness) -> Counter[str]:
    return Counter(c.args["user_id"] for c in h.slack.calls_to("views.publish"))


async def assert_homes_are_fresh(h: Harness) -> None:
    """What each person's Home shows is what their Home is now, rendered at the time it was
    published (a Home's time lines, 'updated …' and 'expires in …', are the publish's)."""
    last = {c.args["user_id"]: c for c in h.slack.calls_to("views.publish")}
    for person in (ALICE, *APPROVERS):
        shown = h.slack.home(person)
        assert shown is not None, person
        fresh = home_payload(await h.rt.services.home.facts(person), now=last[person].at)
        assert {"type": "home", "blocks": shown["blocks"]} == fresh, person


async def test_a_request_publishes_only_the_homes_it_changes(tmp_path):
    async with bot(tmp_path, policy=THREE) as h:
        card = await h.request(quote_text="quote h100x8 nodes=4")  # two approvers
        submitted = published(h)
        assert all(submitted[a] == 1 for a in APPROVERS), submitted  # it waits for them
        await assert_homes_are_fresh(h)

        await h.click(card, Action.APPROVE, user=BOB)  # 1 of 2: pending as it was
        assert published(h) == submitted
        await assert_homes_are_fresh(h)

        await h.click(h.cards()[-1], Action.APPROVE, user=CAROL)  # approved: off their Homes
        decided = published(h)
        assert all(decided[a] == 2 for a in APPROVERS), decided
        await h.advance(60)
        await h.advance(3600 * 2)
        await h.click(h.progress(GENERAL)[-1], Action.TERMINATE, user=ALICE)
        await h.advance(30)
        after = published(h)
        # The launch, running and terminate change the requester's Home only (her cluster).
        assert all(after[a] == 2 for a in APPROVERS), after
        assert after[ALICE] <= 7, after  # 9 before: none for the launch's steps
        await assert_homes_are_fresh(h)


async def test_two_replicas_each_publish_what_they_change(tmp_path):
    # One request decided across two replicas: the one that sees a change publishes it, even
    # when the other published that request's Homes before (what it remembers is its own).
    (tmp_path / "policy.yaml").write_text(THREE)
    async with replicas(tmp_path, 2, database_url=None,
                        env={"POLICY_FILE": str(tmp_path / "policy.yaml")}) as (one, two):
        card = await one.request(quote_text="quote h100x8 nodes=4")
        await two.click(card, Action.APPROVE, user=BOB)
        await one.click(one.cards()[-1], Action.APPROVE, user=DAVE)
        await one.advance(60)
        for h in (one, two):
            await h.rt.settle()
        await assert_homes_are_fresh(one)
        assert "Nothing is waiting for your approval" in str(one.slack.home(CAROL))
