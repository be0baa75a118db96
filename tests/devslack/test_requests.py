"""SlackRequests against a real Bolt AsyncApp: signing, payload shapes, acks acted upon."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlencode

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry import builtin_async_handlers
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from bot.clock import ManualClock, SystemClock
from devslack import FakeSlack, Reply, SlackRequests, signed_headers

from .conftest import ALICE, BOB, CAROL, SECRET, Demo, build_demo, serve_bolt, small_modal


async def test_a_signed_slash_command_is_acked_fast_and_the_reply_shown(slack, requests):
    reply = await requests.slash("/echo", "quote h100x8 nodes=4", user_id=ALICE)

    assert (reply.status, reply.body) == (200, "echo: quote h100x8 nodes=4")
    assert reply.elapsed < 1.0 and not reply.timed_out
    [shown] = slack.ephemerals("alice")
    assert (shown.text, shown.channel, shown.via) == (
        "echo: quote h100x8 nodes=4",
        "C0GENERAL",
        "ack",
    )


async def test_the_slash_payload_has_slack_fields(
    slack: FakeSlack, requests: SlackRequests, demo: Demo
):
    await requests.slash("/demo", "a b", user_id=BOB, channel_id="#random")
    await slack.settle()

    body = demo.bodies[-1]
    assert body["command"] == "/demo" and body["text"] == "a b"
    assert (body["user_id"], body["user_name"], body["team_id"]) == (BOB, "bob", "T0001")
    assert (body["channel_id"], body["channel_name"]) == ("C0RANDOM", "random")
    assert body["response_url"].startswith(slack.base_url + "/response/")
    assert body["trigger_id"] and body["api_app_id"] == "A0001"
    [card] = slack.messages("random")
    assert card.text == "Demo card" and card.user == "UBOT"


async def test_forged_and_stale_requests_are_refused_401(slack, requests):
    body = urlencode({"command": "/echo", "text": "x", "user_id": ALICE}).encode()
    now = int(SystemClock().now().timestamp())

    forged = await requests.raw(body, signed_headers(body, secret="wrong", timestamp=now))
    stale = await requests.raw(body, signed_headers(body, secret=SECRET, timestamp=now - 301))
    unsigned = await requests.raw(body, {"Content-Type": "application/x-www-form-urlencoded"})
    fresh = await requests.raw(body, signed_headers(body, secret=SECRET, timestamp=now - 10))

    assert [forged.status, stale.status, unsigned.status] == [401, 401, 401]
    assert fresh.status == 200


async def test_a_client_clock_five_minutes_behind_is_stale(slack, events_url):
    behind = ManualClock(SystemClock().now() - timedelta(seconds=301))
    async with SlackRequests(
        events_url=events_url, signing_secret=SECRET, slack=slack, clock=behind
    ) as late:
        reply = await late.slash("/echo", "x", user_id=ALICE)
    assert reply.status == 401
    assert slack.ephemerals("alice") == []


async def test_a_click_carries_the_recorded_message(
    slack: FakeSlack, requests: SlackRequests, demo: Demo
):
    await requests.slash("/demo", user_id=ALICE)
    await slack.settle()
    [card] = slack.messages("general")

    reply = await requests.click(card, "open_form", user_id=BOB)
    await slack.settle()

    assert reply.status == 200 and reply.body == ""
    body = demo.bodies[-1]
    assert body["type"] == "block_actions"
    assert body["user"] == {"id": BOB, "username": "bob", "name": "bob", "team_id": "T0001"}
    assert body["container"] == {
        "type": "message",
        "message_ts": card.ts,
        "channel_id": "C0GENERAL",
        "is_ephemeral": False,
    }
    assert body["channel"] == {"id": "C0GENERAL", "name": "general"}
    assert body["message"]["ts"] == card.ts and body["message"]["blocks"] == card.blocks
    [action] = body["actions"]
    assert action["type"] == "button" and action["action_id"] == "open_form"
    assert (action["block_id"], action["value"], action["style"]) == (
        "card_actions",
        "form-1",
        "primary",
    )
    assert body["response_url"] and body["trigger_id"]
    modal = slack.current_modal("bob")
    assert modal is not None and modal["callback_id"] == "demo_form"
    assert modal["private_metadata"] == f"C0GENERAL|{card.ts}"


async def test_a_click_can_forge_a_value(slack: FakeSlack, requests: SlackRequests, demo: Demo):
    await requests.slash("/demo", user_id=ALICE)
    await slack.settle()
    [card] = slack.messages("general")
    await requests.click(card, "dismiss", user_id=ALICE, value="something-else")
    assert demo.bodies[-1]["actions"][0]["value"] == "something-else"
    with pytest.raises(ValueError, match="no element with action_id 'nope'"):
        await requests.click(card, "nope", user_id=ALICE)


async def test_submit_view_errors_keep_the_modal_and_success_closes_it(
    slack: FakeSlack, requests: SlackRequests, demo: Demo
):
    await requests.slash("/demo", user_id=ALICE)
    await slack.settle()
    [card] = slack.messages("general")
    await requests.click(card, "open_form", user_id=ALICE)
    await slack.settle()
    modal = slack.current_modal("alice")
    assert modal is not None

    refused = await requests.submit_view(modal, user_id=ALICE, values={"name": {"value": "bad"}})
    assert refused.json == {"response_action": "errors", "errors": {"name": "Name cannot be bad"}}
    assert slack.current_modal("alice") == modal

    accepted = await requests.submit_view(
        modal, user_id=ALICE, values={"name": {"value": "Grace"}, "size": {"value": "large"}}
    )
    await slack.settle()

    assert accepted.status == 200 and accepted.body == ""
    submitted = demo.bodies[-1]
    assert submitted["type"] == "view_submission"
    assert submitted["view"]["state"]["values"] == {
        "name": {"value": {"type": "plain_text_input", "value": "Grace"}},
        "size": {
            "value": {
                "type": "static_select",
                "selected_option": {
                    "text": {"type": "plain_text", "text": "Large"},
                    "value": "large",
                },
            }
        },
    }
    assert submitted["view"]["hash"] == modal["hash"] and submitted["view"]["id"] == modal["id"]
    assert slack.current_modal("alice") is None
    assert [m.text for m in slack.dms("alice")] == ["Thanks Grace: large"]
    assert [m.text for m in slack.thread("general", card.ts)] == [
        "Demo card",
        "Form sent by <@U0ALICE>",
    ]
    assert slack.messages("general") == [card]  # the reply stays in its thread


async def test_submit_view_refuses_values_for_unknown_inputs(slack, requests):
    modal = slack.add_view(ALICE, small_modal())
    with pytest.raises(ValueError, match="no input 'nope'"):
        await requests.submit_view(modal, user_id=ALICE, values={"nope": {"x": "1"}})
    with pytest.raises(ValueError, match="'huge' is not an option"):
        await requests.submit_view(modal, user_id=ALICE, values={"pick": {"choice": "huge"}})


async def test_view_submission_acks_update_push_and_clear_the_stack(
    slack: FakeSlack, requests: SlackRequests, demo: Demo
):
    actions: Iterator[dict[str, Any]] = iter(
        [
            {"response_action": "update", "view": small_modal("Updated")},
            {"response_action": "push", "view": small_modal("Pushed")},
            {"response_action": "clear"},
        ]
    )

    @demo.app.view("stacked")
    async def stacked(ack: Any) -> None:
        await ack(**next(actions))

    root = slack.add_view(ALICE, small_modal("Root"))
    await requests.submit_view(root, user_id=ALICE)
    updated = slack.current_modal("alice")
    assert (
        updated is not None
        and updated["id"] == root["id"]
        and updated["title"]["text"] == "Updated"
    )
    assert updated["hash"] != root["hash"]

    await requests.submit_view(updated, user_id=ALICE)
    pushed = slack.current_modal("alice")
    assert pushed is not None and pushed["title"]["text"] == "Pushed"
    assert pushed["previous_view_id"] == root["id"] and pushed["root_view_id"] == root["id"]

    await requests.submit_view(pushed, user_id=ALICE)
    assert slack.current_modal("alice") is None


async def test_an_ack_naming_a_non_input_block_is_a_violation(
    slack: FakeSlack, requests: SlackRequests, demo: Demo
):
    @demo.app.view("stacked")
    async def stacked(ack: Any) -> None:
        await ack(response_action="errors", errors={"not_a_block": "oops"})

    modal = slack.add_view(ALICE, small_modal())
    await requests.submit_view(modal, user_id=ALICE)

    [violation] = slack.violations
    assert violation.method == "ack" and "not_a_block" in violation.problems[0]
    slack.violations.clear()


async def test_close_view_notifies_only_when_asked(
    slack: FakeSlack, requests: SlackRequests, demo: Demo
):
    closed: list[dict[str, Any]] = []

    @demo.app.view_closed("stacked")
    async def on_close(ack: Any, body: dict[str, Any]) -> None:
        await ack()
        closed.append(body)

    quiet = slack.add_view(ALICE, small_modal())
    assert await requests.close_view(quiet, user_id=ALICE) is None
    noisy = slack.add_view(ALICE, {**small_modal(), "notify_on_close": True})
    reply = await requests.close_view(noisy, user_id=ALICE)

    assert reply is not None and reply.status == 200
    assert closed[0]["type"] == "view_closed" and closed[0]["view"]["id"] == noisy["id"]
    assert slack.current_modal("alice") is None


async def test_a_home_tab_button_click_has_a_view_container(
    slack: FakeSlack, requests: SlackRequests, demo: Demo
):
    await requests.app_home_opened(BOB)
    await slack.settle()
    home = slack.home("bob")
    assert home is not None and home["type"] == "home"

    reply = await requests.click(home, "refresh", user_id=BOB)

    assert reply.status == 200
    body = demo.bodies[-1]
    assert body["container"] == {"type": "view", "view_id": home["id"]}
    assert body["view"]["id"] == home["id"] and "response_url" not in body and "message" not in body


async def test_events_arrive_in_an_envelope_and_url_verification_echoes(
    slack: FakeSlack, requests: SlackRequests, demo: Demo
):
    verified = await requests.url_verification("abc123")
    assert verified.status == 200 and verified.json == {"challenge": "abc123"}

    reply = await requests.event(
        {"type": "app_home_opened", "user": ALICE, "tab": "home"}, event_id="Ev42"
    )
    await slack.settle()

    assert reply.status == 200
    envelope = demo.bodies[-1]
    assert envelope["type"] == "event_callback" and envelope["event_id"] == "Ev42"
    assert envelope["authorizations"][0]["user_id"] == "UBOT"
    assert envelope["event"]["user"] == ALICE and envelope["event"]["event_ts"]
    assert slack.home("alice") is not None


async def test_respond_goes_through_the_response_url(
    slack: FakeSlack, requests: SlackRequests, demo: Demo
):
    @demo.app.command("/respond")
    async def responder(ack: Any, respond: Any) -> None:
        await ack("Working…")
        await respond(text="Done", replace_original=True)
        await respond(text="Everyone look", response_type="in_channel")

    await requests.slash("/respond", user_id=CAROL)
    await slack.settle()

    [working] = slack.ephemerals("carol")
    assert working.text == "Done" and [v.text for v in working.edits] == ["Working…"]
    assert [m.text for m in slack.messages("general")] == ["Everyone look"]
    assert [c.method for c in slack.calls if c.method in ("ack", "response_url")] == [
        "ack",
        "response_url",
        "response_url",
    ]


async def test_respond_before_ack_is_not_held_back(
    slack: FakeSlack, requests: SlackRequests, demo: Demo
):
    @demo.app.command("/eager")
    async def eager(ack: Any, respond: Any) -> None:
        await respond(text="early")  # bad manners, but Slack accepts it
        await ack("late ack")

    reply = await requests.slash("/eager", user_id=ALICE)
    await slack.settle()

    assert reply.status == 200 and not reply.timed_out
    assert [m.text for m in slack.ephemerals("alice")] == ["early", "late ack"]


async def test_a_429_is_retried_by_the_sdk_handler_once_the_clock_allows(slack, clock, monkeypatch):
    slept: list[float] = []

    async def virtual_sleep(seconds: float) -> None:  # the handler's sleep, on FakeSlack's clock
        slept.append(seconds)
        clock.advance(seconds)

    monkeypatch.setattr(builtin_async_handlers, "asyncio", SimpleNamespace(sleep=virtual_sleep))
    client = AsyncWebClient(
        token=slack.bot_token,
        base_url=slack.api_url,
        retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=2)],
    )
    demo = build_demo(client)
    slack.fail_next("chat.postMessage", retry_after=1)

    async with (
        serve_bolt(demo.app) as url,
        SlackRequests(events_url=url, signing_secret=SECRET, slack=slack) as req,
    ):
        reply = await req.slash("/demo", user_id=ALICE)
        await slack.settle()

    assert reply.status == 200
    posts = slack.calls_to("chat.postMessage")
    assert [c.status for c in posts] == [429, 200]
    assert posts[0].error == "ratelimited"
    assert len(slept) == 1 and 1 <= slept[0] < 2  # Retry-After 1, plus the SDK's jitter
    assert [m.text for m in slack.messages("general")] == ["Demo card"]


async def test_a_retry_before_retry_after_is_refused_again(slack, clock, monkeypatch):
    async def no_time_passes(seconds: float) -> None:
        pass

    monkeypatch.setattr(builtin_async_handlers, "asyncio", SimpleNamespace(sleep=no_time_passes))
    client = AsyncWebClient(
        token=slack.bot_token,
        base_url=slack.api_url,
        retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=2)],
    )
    slack.fail_next("chat.postMessage", retry_after=5)

    with pytest.raises(SlackApiError) as refused:
        await client.chat_postMessage(channel="general", text="hi")
    assert refused.value.response.status_code == 429
    assert [c.status for c in slack.calls_to("chat.postMessage")] == [429, 429, 429]
    assert refused.value.response.headers["Retry-After"] == "5"

    clock.advance(5)
    assert (await client.chat_postMessage(channel="general", text="hi"))["ok"]


async def test_a_trigger_used_after_three_seconds_has_expired(
    slack: FakeSlack, requests: SlackRequests, demo: Demo, clock: ManualClock
):
    @demo.app.action("slow_open")
    async def slow_open(ack: Any, body: dict[str, Any], client: AsyncWebClient) -> None:
        await ack()
        clock.advance(3.5)  # stands for slow work done before views.open
        try:
            await client.views_open(trigger_id=body["trigger_id"], view=small_modal())
        except SlackApiError as exc:
            demo.errors.append(exc.response["error"])

    message = slack.post(
        channel="C0GENERAL", text="x", blocks=[_button_block("slow_open")], via="test"
    )
    await requests.click(message, "slow_open", user_id=ALICE)
    await slack.settle()

    assert demo.errors == ["expired_trigger_id"]
    assert slack.current_modal("alice") is None


async def test_invalid_blocks_from_the_bot_are_recorded_as_violations(
    slack: FakeSlack, requests: SlackRequests, demo: Demo
):
    @demo.app.command("/broken")
    async def broken(ack: Any, say: Any) -> None:
        await ack()
        try:
            await say(
                text="x",
                blocks=[{"type": "section", "text": {"type": "mrkdwn", "text": "y" * 3001}}],
            )
        except SlackApiError as exc:
            demo.errors.append(exc.response["error"])

    await requests.slash("/broken", user_id=ALICE)
    await slack.settle()

    assert demo.errors == ["invalid_blocks"]
    [violation] = slack.violations
    assert violation.method == "chat.postMessage" and "3000" in violation.problems[0]
    slack.violations.clear()


async def test_an_ack_slower_than_three_seconds_is_dropped(
    slack: FakeSlack, requests: SlackRequests, demo: Demo, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr("devslack.reply.ACK_DEADLINE", -1.0)  # every ack is "late"
    reply = await requests.slash("/echo", "late", user_id=ALICE)
    assert reply.status == 200 and reply.timed_out
    assert slack.ephemerals("alice") == []


def _button_block(action_id: str) -> dict[str, Any]:
    button = {
        "type": "button",
        "action_id": action_id,
        "text": {"type": "plain_text", "text": "Go"},
    }
    return {"type": "actions", "block_id": "b1", "elements": [button]}


def test_reply_content_is_json_when_json_else_text():
    assert Reply(200, "hi", "text/plain", 0.1).json is None
    assert Reply(200, json.dumps({"a": 1}), "application/json", 0.1).content == {"a": 1}
    assert Reply(200, "", "application/json", 0.1).content == ""
