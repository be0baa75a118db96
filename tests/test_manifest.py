"""manifest.yaml and manifest.socket-mode.yaml against Slack's published schema, and against
what the code really does: every command, event and action they declare has a listener, and
their scopes are exactly the ones the Web API methods the bot calls need."""

import json
import re
import time
from pathlib import Path
from urllib.parse import urlencode

import jsonschema
import pytest
import yaml
from slack_bolt.request.async_request import AsyncBoltRequest

from bot.slack.ids import Action, View
from devslack.requests import signed_headers
from tests.e2e.harness import ALICE, SECRET, bot

ROOT = Path(__file__).parent.parent
SCHEMA = ROOT / "tests/data/slack/manifest.schema.1.0.0.json"

# The bot scope each Web API method needs (none: no scope, e.g. views.*, auth.test).
SCOPES = {
    "chat_postMessage": "chat:write", "chat_update": "chat:write",
    "chat_postEphemeral": "chat:write", "chat_delete": "chat:write",
    "conversations_open": "im:write", "users_info": "users:read",
    "conversations_info": "channels:read",
    "views_open": None, "views_update": None, "views_publish": None, "views_push": None,
    "auth_test": None, "usergroups_users_list": "usergroups:read",
    "files_upload_v2": "files:write", "conversations_list": "channels:read",
    # A post whose answer never came readable is looked for in the channel, the private
    # channel or the DM it went to (bot/slack/maybe.py): the bot reads back its own posts.
    "conversations_history": ("channels:history", "groups:history", "im:history"),
    "conversations_replies": ("channels:history", "groups:history", "im:history"),
}


MANIFESTS = ("manifest.yaml", "manifest.socket-mode.yaml")  # HTTP mode, Socket Mode


def _load(name):
    return yaml.safe_load((ROOT / name).read_text())


@pytest.fixture(scope="module", params=MANIFESTS)
def manifest(request):
    return _load(request.param)


def test_the_socket_mode_manifest_is_the_http_one_without_urls():
    http, socket = _load(MANIFESTS[0]), _load(MANIFESTS[1])
    assert socket["settings"]["socket_mode_enabled"] and not http["settings"]["socket_mode_enabled"]
    assert "request_url" not in socket["settings"]["interactivity"]
    assert "request_url" not in socket["settings"]["event_subscriptions"]
    assert all("url" not in c for c in socket["features"]["slash_commands"])
    for command in http["features"]["slash_commands"]:
        del command["url"]
    del http["settings"]["interactivity"]["request_url"]
    del http["settings"]["event_subscriptions"]["request_url"]
    http["settings"]["socket_mode_enabled"] = True
    assert socket == http  # same scopes, commands, events, app home


def test_the_messages_tab_is_read_only(manifest):
    """The chosen DM behaviour: the bot DMs people (SSH details, reminders) in its Messages tab,
    which they can read but not type in — so no DM to the bot goes unanswered. Nothing listens
    to message.im. (im:history is asked for only to read back the bot's own DMs — the tab is
    read-only, so they are all there is — when Slack's answer to one never came readable.)"""
    home = manifest["features"]["app_home"]
    assert home["messages_tab_enabled"] and home["messages_tab_read_only_enabled"]
    assert "message.im" not in manifest["settings"]["event_subscriptions"]["bot_events"]


def test_manifest_validates_against_slacks_schema(manifest):
    jsonschema.Draft7Validator(json.loads(SCHEMA.read_text())).validate(manifest)


def test_schema_rejects_what_slack_rejects(manifest):
    broken = json.loads(json.dumps(manifest))
    broken["features"]["slash_commands"][0]["command"] = "cluster"  # no leading slash
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(json.loads(SCHEMA.read_text())).validate(broken)


def test_interactivity_needs_a_url_or_socket_mode(manifest):
    # A cross-field rule the schema doesn't check.
    settings = manifest["settings"]
    assert settings["interactivity"]["is_enabled"]
    assert settings["socket_mode_enabled"] or settings["interactivity"]["request_url"]
    assert settings["socket_mode_enabled"] or settings["event_subscriptions"]["request_url"]


def test_scopes_are_exactly_what_the_code_calls(manifest):
    called = set()
    for path in (ROOT / "bot").rglob("*.py"):
        if "devslack" in path.parts or "reserve" in path.parts:
            continue
        called |= set(re.findall(r"\.(chat_\w+|conversations_\w+|views_\w+|users_\w+"
                                 r"|usergroups_\w+|files_\w+)\(",
                                 path.read_text()))
    assert called, "no Web API calls found"
    unknown = called - set(SCOPES)
    assert not unknown, f"add these methods' scopes to the test: {unknown}"
    needed = {scope for m in called
              for scope in (SCOPES[m] if isinstance(SCOPES[m], tuple) else (SCOPES[m],))} - {None}
    # commands: the slash command; chat:write.public: post progress in public channels the
    # bot was never invited to (a request can come from any channel).
    needed |= {"commands", "chat:write.public"}
    assert set(manifest["oauth_config"]["scopes"]["bot"]) == needed


async def test_every_declared_surface_has_a_listener(manifest, tmp_path):
    # the Socket Mode manifest's surfaces are tried over Socket Mode (envelopes, acks)
    async with bot(tmp_path, socket_mode=manifest["settings"]["socket_mode_enabled"]) as h:
        for command in manifest["features"]["slash_commands"]:
            reply = await h.requests.slash(command["command"], "help", user_id=ALICE)
            assert reply.status == 200, command
        for event in manifest["settings"]["event_subscriptions"]["bot_events"]:
            # user_change carries the whole user; tokens_revoked the people's tokens only
            # (the bot's token must keep working for the rest of this test).
            user = {"id": ALICE, "deleted": False} if event == "user_change" else ALICE
            reply = await h.requests.event({"type": event, "user": user, "tab": "home",
                                            "channel": "C0RANDOM",
                                            "tokens": {"oauth": [ALICE]}})
            assert reply.status == 200, event
        await h.rt.settle()
        assert h.slack.home(ALICE) is not None  # app_home_opened really published a view


async def test_every_action_and_view_id_has_a_listener(tmp_path):
    """Bolt answers 404 to a request no listener matches; none of ours may get one."""
    async with bot(tmp_path) as h:
        payloads = [
            {"type": "block_actions", "user": {"id": ALICE}, "team": {"id": "T0001"},
             "trigger_id": "t", "response_url": h.slack.response_url("x"),
             "actions": [{"action_id": action_id, "block_id": "b", "type": "button",
                          "value": "stale", "action_ts": "1"}]}
            for action_id in Action.ALL
        ] + [
            {"type": "view_submission", "user": {"id": ALICE}, "team": {"id": "T0001"},
             "view": {"id": "V1", "type": "modal", "callback_id": callback_id,
                     "private_metadata": "stale",
                      "state": {"values": {}}}}
            for callback_id in View.ALL
        ]
        for payload in payloads:
            body = urlencode({"payload": json.dumps(payload)})
            headers = signed_headers(body.encode(), secret=SECRET, timestamp=int(time.time()))
            response = await h.rt.bolt.async_dispatch(AsyncBoltRequest(body=body,
                                                                       headers=headers))
            assert response.status == 200, (payload, response.status, response.body)
        await h.rt.settle()


def test_the_oauth_install_asks_for_the_manifests_scopes(manifest):
    from bot.slack.oauth import BOT_SCOPES

    assert list(BOT_SCOPES) == manifest["oauth_config"]["scopes"]["bot"]


DISTRIBUTION = "manifest.distribution.yaml"  # OAuth installs, org-wide, rotating tokens
# Beyond manifest.yaml's (which has app_uninstalled and tokens_revoked too: they stop an
# installation here, the single token there).
LIFECYCLE_EVENTS = ["team_access_granted", "team_access_revoked"]


def test_the_distribution_manifest_validates_against_slacks_schema():
    distribution = _load(DISTRIBUTION)
    validator = jsonschema.Draft7Validator(json.loads(SCHEMA.read_text()))
    validator.validate(distribution)
    broken = json.loads(json.dumps(distribution))
    broken["oauth_config"]["redirect_urls"] = "https://HOST/slack/oauth_redirect"  # not a list
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(broken)


def test_the_distribution_manifest_is_the_http_one_installed_through_oauth():
    """Same scopes, command, Home and URLs as manifest.yaml; plus the redirect URL the OAuth
    flow serves, org-wide installs, rotating tokens, and the events an installation's life
    needs (each handled: tests/e2e/test_oauth_enterprise.py)."""
    from bot.slack.oauth import BOT_SCOPES, REDIRECT_PATH

    http, distribution = _load(MANIFESTS[0]), _load(DISTRIBUTION)
    assert distribution["oauth_config"].pop("redirect_urls") == [f"https://HOST{REDIRECT_PATH}"]
    assert distribution["oauth_config"]["scopes"]["bot"] == list(BOT_SCOPES)
    settings = distribution["settings"]
    assert settings["org_deploy_enabled"] and settings["token_rotation_enabled"]
    assert not settings["socket_mode_enabled"]  # the OAuth flow is HTTP mode's
    events = settings["event_subscriptions"]["bot_events"]
    assert events[-len(LIFECYCLE_EVENTS):] == LIFECYCLE_EVENTS
    del events[-len(LIFECYCLE_EVENTS):]
    settings["org_deploy_enabled"] = settings["token_rotation_enabled"] = False
    assert distribution == http
