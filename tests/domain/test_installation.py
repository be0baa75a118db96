"""The rule of whose requests the bot takes (bot/domain/installation.py), case by case."""

import pytest

from bot.domain.installation import UNKNOWN, UNNAMED, Installed, Origin, outsider

HOME = Installed(team_id="T0HOME")
HOME_IN_GRID = Installed(team_id="T0HOME", enterprise_id="E0ORG")
ORG = Installed(enterprise_id="E0ORG", org_wide=True)  # single-token: its workspaces not known
# Installed through OAuth: the workspaces the org's admins gave the app to.
GIVEN = Installed(enterprise_id="E0ORG", org_wide=True, workspaces=frozenset({"T0ONE", "T0TWO"}))


def origin(*ids: str) -> Origin:
    return Origin(team_ids=frozenset(i for i in ids if i.startswith("T")),
                  enterprise_ids=frozenset(i for i in ids if i.startswith("E")))


@pytest.mark.parametrize(("installed", "named", "refused"), [
    (HOME, ["T0HOME"], None),
    (HOME, ["T0OTHER"], "T0OTHER"),
    # A Slack Connect person: our team in `team.id`, theirs in `user.team_id`.
    (HOME, ["T0HOME", "T0OTHER"], "T0OTHER"),
    (HOME, ["T0HOME", "E0ORG"], "E0ORG"),  # we are in no organization: theirs is elsewhere
    (HOME, [], UNNAMED),  # says nothing of where it comes from
    (HOME, ["E0ORG"], UNNAMED),  # an organization only, for a workspace install
    (HOME_IN_GRID, ["T0HOME", "E0ORG"], None),
    (HOME_IN_GRID, ["T0HOME", "E0ELSE"], "E0ELSE"),
    (HOME_IN_GRID, ["T0SISTER", "E0ORG"], "T0SISTER"),  # a sister workspace of the org
    # Org-wide, its workspaces not known (single-token): every workspace of the org, no other.
    (ORG, ["T0ANY", "E0ORG"], None),
    (ORG, ["T0ANY", "E0ELSE"], "E0ELSE"),
    (ORG, ["T0ANY", "E0ORG", "E0ELSE"], "E0ELSE"),
    (ORG, ["T0ANY"], UNNAMED),
    # Org-wide, its workspaces known: those, and only those.
    (GIVEN, ["T0ONE", "E0ORG"], None),
    (GIVEN, ["T0ONE", "T0TWO", "E0ORG"], None),
    (GIVEN, ["T0THREE", "E0ORG"], "T0THREE"),  # of the org, not given the app
    (GIVEN, ["T0ONE", "T0OUT", "E0ORG"], "T0OUT"),  # a Slack Connect guest from outside
    (GIVEN, ["T0ONE", "E0ELSE"], "E0ELSE"),
    (GIVEN, ["T0ONE"], UNNAMED),
    # Not known yet where we are installed: nothing goes through on a guess.
    (None, ["T0HOME"], UNKNOWN),
    (Installed(), ["T0HOME"], UNKNOWN),
    (Installed(org_wide=True, team_id="T0HOME"), ["T0HOME"], UNKNOWN),
])
def test_every_named_workspace_must_be_the_installation(installed, named, refused):
    said = outsider(installed, origin(*named))
    if refused is None:
        assert said is None
    else:
        assert said is not None and (said == refused or refused in said)
        assert "nothing was done" in said
