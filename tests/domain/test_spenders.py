"""The pure rule of who may spend (bot/domain/spenders.py)."""

from bot.domain.policy import Policy
from bot.domain.spenders import Installed, SpenderFacts, foreign_workspace, spender_refusal

EVERYONE = Policy(approver_ids=frozenset({"U0BOB"}))
HOME = Installed(team_id="T0HOME")
ORG = Installed(team_id=None, enterprise_id="E0ORG", org_wide=True)


def facts(**kw: object) -> SpenderFacts:
    return SpenderFacts.model_validate({"user_id": "U0ALICE", "team_id": "T0HOME", **kw})


def test_everyone_in_the_installed_team_by_default_but_guests():
    assert spender_refusal(EVERYONE, HOME, facts()) is None
    refusal = spender_refusal(EVERYONE, HOME, facts(is_guest=True))
    assert refusal is not None and "allow_guests" in refusal
    allowing = EVERYONE.model_copy(update={"allow_guests": True})
    assert spender_refusal(allowing, HOME, facts(is_guest=True)) is None


def test_requesters_by_id_or_group():
    listed = EVERYONE.model_copy(update={"requester_ids": frozenset({"U0DAVE"}),
                                         "requester_groups": frozenset({"S0ML"})})
    refusal = spender_refusal(listed, HOME, facts())
    assert refusal is not None and "requesters" in refusal
    assert spender_refusal(listed, HOME, facts(user_id="U0DAVE")) is None
    assert spender_refusal(listed, HOME, facts(in_requester_groups=True)) is None


def test_another_workspace_is_refused_first_even_for_a_listed_requester():
    refusal = spender_refusal(EVERYONE, HOME, facts(team_id="T0OTHER"))
    assert refusal is not None and "T0OTHER" in refusal
    # An org-wide install serves every workspace of its organization, and no other.
    assert not foreign_workspace(ORG, team_id="T0ANY", enterprise_id="E0ORG")
    assert foreign_workspace(ORG, team_id="T0ANY", enterprise_id="E0ELSE")
    # Unknown (auth.test not answered yet, or no id in the payload) is not proof of anything.
    assert not foreign_workspace(Installed(), team_id="T0OTHER", enterprise_id=None)
    assert not foreign_workspace(HOME, team_id=None, enterprise_id=None)
