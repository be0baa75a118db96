"""The SIGHUP reload in process: a sound file is used at once, a bad one changes nothing."""

from bot.app.reload import reload_policy
from tests.e2e.harness import ALICE, DAVE, bot
from tests.e2e.test_oauth_policies import ask
from tests.e2e.test_policy import policy

RANDOM = "C0RANDOM"  # a channel of the local Slack's


async def test_a_sound_file_applies_at_once_and_a_bad_one_changes_nothing(tmp_path):
    async with bot(tmp_path, policy=policy()) as h:
        people, quoting = h.rt.services.people, h.rt.services.quoting
        assert quoting.policy().auto_approve_below_cents == 1000
        path = h.rt.settings.policy_file
        assert path is not None

        path.write_text(policy(approval={"auto_approve_below": 30.0,
                                         "one_approver_up_to": 100.0}))
        assert await reload_policy(h.rt) == []
        assert people.policy.auto_approve_below_cents == 3000
        assert quoting.policy().auto_approve_below_cents == 3000
        before = people.policy

        path.write_text("approvers:\n  users: [nobody]\n")
        problems = await reload_policy(h.rt)
        assert problems and all(str(path) in p for p in problems)
        assert people.policy is before and quoting.policy().auto_approve_below_cents == 3000
        await h.rt.notifier.deliver_notices()
        told = [m.text for m in h.slack.dms(DAVE)]  # an admin of the policy in force
        assert len(told) == 1 and "not used" in told[0]
        assert await reload_policy(h.rt) == problems  # the same bad file: said once
        assert len(h.slack.dms(DAVE)) == 1


async def test_a_reload_changes_what_the_quote_says_about_the_envelope(tmp_path):
    # Issue 16: the quote states how the envelope ends; after a reload it must say the new rule.
    async with bot(tmp_path, policy=policy()) as h:
        quoting = h.rt.services.quoting
        shown = quoting.policy()
        assert (shown.max_lifetime_hours, shown.enforce_lifetime) == (None, False)
        path = h.rt.settings.policy_file
        assert path is not None
        path.write_text(policy(limits={"max_lifetime_hours": 12, "enforce_lifetime": True}))
        assert await reload_policy(h.rt) == []
        shown = quoting.policy()
        assert (shown.max_lifetime_hours, shown.enforce_lifetime) == (12, True)


async def test_a_reload_gives_an_installation_its_own_approvals_channel_at_once(tmp_path):
    # Issue 29: the approvals channel is read per card, so a reload moves the next card.
    async with bot(tmp_path, policy=policy()) as h:
        path = h.rt.settings.policy_file
        assert path is not None
        path.write_text(policy(installations={h.slack.team_id: {"approvals_channel": RANDOM}}))
        assert await reload_policy(h.rt) == []
        await ask(h, h.requests, ALICE, RANDOM)  # the card there, and only there
        assert not h.cards()
