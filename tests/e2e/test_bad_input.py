"""Bad input gets a private answer naming the bad part and the right form, and changes nothing.
Unsigned, forged or stale requests get 401, signed malformed ones 400; none changes anything."""

import json
import time
from urllib.parse import urlencode

import pytest

from bot.slack.blocks.launch_modal import FIELD_ENV, FIELD_NAME, FIELD_PORTS, FIELD_SSH_KEYS
from bot.slack.ids import Action
from devslack.requests import signed_headers
from tests.e2e.harness import ALICE, BOB, SECRET, bot


@pytest.mark.parametrize(("text", "says"), [
    ("quote h100x8 nodes=9", "arranged through AI Reserve sales"),
    ("quote h100x9 nodes=4", "At most 8 GPUs per node for H100"),
    ("quote h100x8 nodes=four", "whole number"),
    ("quote h900x8 nodes=4", "Unknown accelerator `h900`"),
    ("quote h100x8 nodes=4 please", "I don't understand `please`"),
    ("quote h100x8 nodes=4 volume=vol_nope", "volume"),
    ("status clu_nope", "I don't know a cluster `clu_nope`"),
    ("terminate clu_nope", "I don't know a cluster `clu_nope`"),
    ("quote " + "x" * 600, "at most 500"),
    ("quote h100x8 nödes=4", "plain ASCII"),
    ("frobnicate", "I don't know the command `frobnicate`"),
])
async def test_bad_commands_get_a_clear_private_answer(tmp_path, text, says):
    async with bot(tmp_path) as h:
        reply = await h.slash(text)
        assert reply.status == 200
        shown = [h.text_of(m) for m in h.slack.ephemerals(ALICE)]
        assert any(says in s for s in shown), shown
        assert h.slack.messages("C0GENERAL") == [] and h.cards() == []
        assert "Traceback" not in "".join(shown)
        assert await h.requests_in_db() == []


async def test_help_and_empty_command_list_every_command(tmp_path):
    async with bot(tmp_path) as h:
        for text in ("", "help"):
            reply = await h.slash(text)
            body = json.dumps(reply.json)
            for verb in ("quote", "list", "status", "terminate", "help"):
                assert f"/cluster {verb}" in body


async def test_modal_errors_are_shown_next_to_their_fields(tmp_path):
    async with bot(tmp_path) as h:
        card = await h.quote()
        await h.click(card, Action.QUOTE_REQUEST_LAUNCH, user=ALICE)
        modal = h.slack.last_view(ALICE)
        reply = await h.requests.submit_view(modal, user_id=ALICE, values={
            FIELD_NAME: {FIELD_NAME: "Not A Name!"},
            FIELD_ENV: {FIELD_ENV: "MALLOC_ARENA_MAX=1\nWORLD_SIZE=4"},
            FIELD_PORTS: {FIELD_PORTS: "8000/udp"},
            FIELD_SSH_KEYS: {FIELD_SSH_KEYS: "not a key"},
        })
        errors = reply.json["errors"]
        assert reply.json["response_action"] == "errors"
        assert set(errors) == {FIELD_NAME, FIELD_ENV, FIELD_PORTS, FIELD_SSH_KEYS}
        assert "WORLD_SIZE" in errors[FIELD_ENV]
        await h.rt.settle()
        assert h.cards() == []  # nothing was asked of the approvers


async def test_forged_stale_unsigned_and_malformed_requests_get_401(tmp_path):
    async with bot(tmp_path) as h:
        body = urlencode({"command": "/cluster", "text": "quote h100x8 nodes=4",
                          "user_id": ALICE, "channel_id": "C0GENERAL", "team_id": "T0001",
                          "response_url": "http://127.0.0.1:1/x", "trigger_id": "t"}).encode()
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        now = int(time.time())
        cases = {
            "unsigned": form,
            "forged": {**form, **signed_headers(body, secret="wrong", timestamp=now)},
            "stale": {**form, **signed_headers(body, secret=SECRET, timestamp=now - 301)},
            "garbage signature": {**form, "X-Slack-Signature": "v0=zz",
                                  "X-Slack-Request-Timestamp": "yesterday"},
        }
        for name, headers in cases.items():
            reply = await h.requests.raw(body, headers)
            assert reply.status == 401, name
        reply = await h.requests.raw(b"\xff\xfe\x00", form)  # not even UTF-8
        assert reply.status == 401
        for raw in (b"payload=%7Bnot-json", b"payload=%5B%5D", b"payload=%7B%7D", b"a=%ZZ"):
            reply = await h.requests.raw(raw, {**form, **signed_headers(
                raw, secret=SECRET, timestamp=now)})
            # Signed, so not 401: malformed (400, or Bolt's 404) — or, naming no workspace at
            # all, refused by the workspace gate before any listener (200, nothing done).
            assert reply.status in (400, 404) or (raw == b"a=%ZZ" and reply.status == 200), raw
        await h.rt.settle()
        assert [c for c in h.slack.calls if c.method != "auth.test"] == []
        assert h.sim.engine.list_clusters() == []


async def test_clicks_with_forged_button_values_change_nothing(tmp_path):
    async with bot(tmp_path) as h:
        card = await h.request()
        await h.click(card, Action.APPROVE, user=BOB, value='["a",{"request_id":"x"}]')
        await h.click(card, Action.APPROVE, user=BOB, value="not json at all")
        shown = " ".join(h.text_of(m) for m in h.slack.ephemerals(BOB))
        assert "no longer valid" in shown
        assert h.sim.engine.list_clusters() == []
