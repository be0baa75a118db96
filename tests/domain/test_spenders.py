"""The pure rule of who may spend (bot/domain/spenders.py)."""

from bot.domain.policy import Policy
from bot.domain.spenders import SpenderFacts, spender_refusal

EVERYONE = Policy(approver_ids=frozenset({"U0BOB"}))


def facts(**kw: object) -> SpenderFacts:
    return SpenderFacts.model_validate({"user_id": "U0ALICE", **kw})


def test_everyone_in_the_installed_team_by_default_but_guests():
    assert spender_refusal(EVERYONE, facts()) is None
    refusal = spender_refusal(EVERYONE, facts(is_guest=True))
    assert refusal is not None and "allow_guests" in refusal
    allowing = EVERYONE.model_copy(update={"allow_guests": True})
    assert spender_refusal(allowing, facts(is_guest=True)) is None


def test_requesters_by_id_or_group():
    listed = EVERYONE.model_copy(update={"requester_ids": frozenset({"U0DAVE"}),
                                         "requester_groups": frozenset({"S0ML"})})
    refusal = spender_refusal(listed, facts())
    assert refusal is not None and "requesters" in refusal
    assert spender_refusal(listed, facts(user_id="U0DAVE")) is None
    assert spender_refusal(listed, facts(in_requester_groups=True)) is None
