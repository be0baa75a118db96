"""Where each kind of Slack payload says it comes from (bot/slack/origin.py): every workspace
and organization it names, wherever Slack puts them."""

import pytest

from bot.slack.origin import actor_of, origin_of, what_of

USER = {"id": "U0A", "username": "a"}


@pytest.mark.parametrize(("body", "teams", "orgs"), [
    ({"command": "/cluster", "user_id": "U0A", "team_id": "T0A", "enterprise_id": ""},
     {"T0A"}, set()),
    ({"command": "/cluster", "user_id": "U0A", "team_id": "T0A", "enterprise_id": "E0A"},
     {"T0A"}, {"E0A"}),
    # A button in a shared channel: our team, the person's own.
    ({"type": "block_actions", "user": {**USER, "team_id": "T0B"}, "team": {"id": "T0A"},
      "enterprise": None}, {"T0A", "T0B"}, set()),
    # Org-wide install: `team` null, the workspace only in user.team_id.
    ({"type": "block_actions", "user": {**USER, "team_id": "T0B"}, "team": None,
      "enterprise": {"id": "E0A", "name": "A"}, "is_enterprise_install": True},
     {"T0B"}, {"E0A"}),
    ({"type": "view_submission", "user": USER, "team": None,
      "view": {"team_id": "T0C", "app_installed_team_id": "T0A"}}, {"T0A", "T0C"}, set()),
    ({"type": "shortcut", "user": USER, "team": {"id": "T0A", "enterprise_id": "E0A"}},
     {"T0A"}, {"E0A"}),
    # Events: the envelope, each authorization, and the event's own user team.
    ({"type": "event_callback", "team_id": "T0A", "enterprise_id": None,
      "authorizations": [{"team_id": "T0A", "enterprise_id": "E0A"}],
      "event": {"type": "app_mention", "user": "U0A", "user_team": "E0B", "team": "T0D"}},
     {"T0A", "T0D"}, {"E0A", "E0B"}),
    ({"type": "event_callback", "team_id": "T0A",
      "event": {"type": "user_change", "user": {"id": "U0A", "team_id": "T0E"}}},
     {"T0A", "T0E"}, set()),
    # Fuzzed values name nothing, and never raise.
    ({"type": "block_actions", "user": {"id": "U0A", "team_id": 5}, "team": ["T0A"],
      "view": "x", "enterprise": {"id": None}}, set(), set()),
    ({"type": "event_callback", "team_id": "T0A", "authorizations": "all", "event": None},
     {"T0A"}, set()),
])
def test_every_workspace_a_payload_names(body, teams, orgs):
    found = origin_of(body)
    assert (found.team_ids, found.enterprise_ids) == (teams, orgs)


def test_who_acts_and_what_they_tried():
    click = {"type": "block_actions", "user": {**USER, "team_id": "T0B"}, "team": {"id": "T0A"},
             "actions": [{"action_id": "request_approve"}]}
    assert actor_of(click).model_dump() == {"user_id": "U0A", "team_id": "T0B",
                                            "enterprise_id": None}
    assert what_of(click) == "block_actions:request_approve"
    command = {"command": "/cluster", "text": "quote h100x8 nodes=4", "user_id": "U0A",
               "team_id": "T0A", "enterprise_id": "E0A"}
    assert actor_of(command).model_dump() == {"user_id": "U0A", "team_id": "T0A",
                                              "enterprise_id": "E0A"}
    assert what_of(command) == "/cluster quote"
    event = {"type": "event_callback", "team_id": "T0A",
             "event": {"type": "app_home_opened", "user": "U0A"}}
    assert (actor_of(event).user_id, actor_of(event).team_id) == ("U0A", "T0A")
    assert what_of(event) == "event:app_home_opened"
    assert what_of({"type": "view_closed", "view": {"callback_id": "launch"}}) == \
        "view_closed:launch"
    long = what_of({"type": "shortcut", "callback_id": "c\ud800" * 99})
    assert long.startswith("shortcut:c\\ud800") and len(long) == 80
