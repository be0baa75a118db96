"""FakeSlack's Web API, called the way the bot calls it: slack_sdk's AsyncWebClient."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import aiohttp
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from devslack import ApiCall, FakeSlack

from .conftest import ALICE, BOB, small_modal

TEXT = {"type": "section", "text": {"type": "mrkdwn", "text": "hello"}}


async def refused(call: Any) -> str:
    with pytest.raises(SlackApiError) as caught:
        await call
    return str(caught.value.response["error"])


async def test_auth_test_answers_who_the_bot_is(slack: FakeSlack, client: AsyncWebClient):
    answer = await client.auth_test()
    assert (answer["user_id"], answer["team_id"], answer["bot_id"]) == ("UBOT", "T0001", "B0001")
    assert slack.calls[0].method == "auth.test" and slack.calls[0].token == "xoxb-devslack"


async def test_a_wrong_or_missing_token_is_refused(slack: FakeSlack):
    assert (
        await refused(AsyncWebClient(token="xoxb-wrong", base_url=slack.api_url).auth_test())
        == "invalid_auth"
    )
    assert await refused(AsyncWebClient(base_url=slack.api_url).auth_test()) == "not_authed"
    assert [c.error for c in slack.calls] == ["invalid_auth", "not_authed"]


async def test_unknown_methods_are_refused(slack: FakeSlack, client: AsyncWebClient):
    assert await refused(client.api_call("chat.frobnicate")) == "unknown_method"


async def test_post_message_returns_increasing_unique_ts(slack: FakeSlack, client: AsyncWebClient):
    first = await client.chat_postMessage(channel="C0GENERAL", text="one")
    second = await client.chat_postMessage(channel="#general", text="two")
    third = await client.chat_postMessage(channel="general", text="three")

    stamps = [first["ts"], second["ts"], third["ts"]]
    assert len(set(stamps)) == 3 and stamps == sorted(stamps, key=float)
    assert first["channel"] == "C0GENERAL" and first["message"]["text"] == "one"
    assert [m.text for m in slack.messages("general")] == ["one", "two", "three"]
    assert (
        await refused(client.chat_postMessage(channel="#nowhere", text="x")) == "channel_not_found"
    )
    with pytest.warns(UserWarning, match="`text` argument is missing"):  # the SDK warns too
        assert await refused(client.chat_postMessage(channel="C0GENERAL")) == "no_text"


async def test_posting_to_a_user_id_lands_in_their_dm(slack: FakeSlack, client: AsyncWebClient):
    opened = await client.conversations_open(users=BOB)
    posted = await client.chat_postMessage(channel=BOB, text="psst")

    assert opened["channel"]["id"] == posted["channel"] == slack.dm_channel(BOB)
    assert (await client.conversations_open(users=[BOB]))["channel"]["id"] == opened["channel"][
        "id"
    ]
    assert [m.text for m in slack.dms("bob")] == ["psst"]
    assert slack.messages("general") == []


async def test_update_edits_in_place_and_keeps_history(slack: FakeSlack, client: AsyncWebClient):
    posted = await client.chat_postMessage(channel="general", text="v1", blocks=[TEXT])
    updated = await client.chat_update(channel="C0GENERAL", ts=posted["ts"], text="v2")

    [message] = slack.messages("general")
    assert updated["ts"] == posted["ts"] == message.ts
    assert message.text == "v2" and message.blocks[0]["text"]["text"] == "hello"  # blocks kept
    assert [(v.text, len(v.blocks)) for v in message.edits] == [("v1", 1)]
    assert (
        await refused(client.chat_update(channel="C0GENERAL", ts="1.2", text="x"))
        == "message_not_found"
    )

    await client.chat_update(channel="C0GENERAL", ts=posted["ts"], text="v3", blocks=[])
    assert message.blocks == [] and len(message.edits) == 2


async def test_delete_removes_a_message(slack: FakeSlack, client: AsyncWebClient):
    posted = await client.chat_postMessage(channel="general", text="oops")
    await client.chat_delete(channel="C0GENERAL", ts=posted["ts"])
    assert slack.messages("general") == []
    assert (
        await refused(client.chat_delete(channel="C0GENERAL", ts=posted["ts"]))
        == "message_not_found"
    )


async def test_threads_and_broadcast_replies(slack: FakeSlack, client: AsyncWebClient):
    parent = await client.chat_postMessage(channel="general", text="parent")
    await client.chat_postMessage(channel="general", text="quiet reply", thread_ts=parent["ts"])
    await client.chat_postMessage(
        channel="general", text="loud reply", thread_ts=parent["ts"], reply_broadcast=True
    )

    assert [m.text for m in slack.thread("general", parent["ts"])] == [
        "parent",
        "quiet reply",
        "loud reply",
    ]
    assert [m.text for m in slack.messages("general")] == ["parent", "loud reply"]


async def test_ephemerals_are_kept_per_user(slack: FakeSlack, client: AsyncWebClient):
    answer = await client.chat_postEphemeral(channel="general", user=ALICE, text="only you")
    assert answer["message_ts"]
    assert [m.text for m in slack.ephemerals("alice")] == ["only you"]
    assert slack.ephemerals("bob") == [] and slack.messages("general") == []
    assert (
        await refused(client.chat_postEphemeral(channel="general", user="U0NOBODY", text="x"))
        == "user_not_found"
    )
    ts = answer["message_ts"]
    assert (
        await refused(client.chat_update(channel="C0GENERAL", ts=ts, text="x"))
        == "message_not_found"
    )


async def test_users_info_and_lookup_by_email(slack: FakeSlack, client: AsyncWebClient):
    info = await client.users_info(user=BOB)
    assert info["user"]["name"] == "bob" and info["user"]["tz"] == "America/New_York"
    assert info["user"]["tz_offset"] in (-18000, -14400)
    found = await client.users_lookupByEmail(email="carol@example.com")
    assert found["user"]["is_admin"] is True
    assert await refused(client.users_info(user="U0NOBODY")) == "user_not_found"


async def test_form_encoded_calls_with_json_fields_work(slack: FakeSlack):
    form = {
        "token": slack.bot_token,
        "channel": "general",
        "text": "x",
        "blocks": json.dumps([TEXT]),
    }
    async with (
        aiohttp.ClientSession() as session,
        session.post(slack.api_url + "chat.postMessage", data=form) as resp,
    ):
        answer = await resp.json()
    assert answer["ok"] and slack.messages("general")[0].blocks[0]["text"]["text"] == "hello"
    assert slack.calls[-1].token == slack.bot_token and "token" not in slack.calls[-1].args


@pytest.mark.parametrize(
    ("blocks", "text", "problem"),
    [
        ([TEXT], None, "text` fallback"),
        ([TEXT] * 51, "x", "at most 50"),
        ([{"type": "bogus"}], "x", "unknown block type"),
        ([{"type": "section", "text": {"type": "mrkdwn", "text": "y" * 3001}}], "x", "3000"),
        (
            [{"type": "actions", "elements": [{"type": "buttonx", "action_id": "a"}]}],
            "x",
            "unknown type",
        ),
        ([{"type": "actions", "elements": []}], "x", "at least one element"),
        ([{"type": "header", "text": {"type": "mrkdwn", "text": "h"}}], "x", "plain_text"),
        ([{**TEXT, "block_id": "same"}, {**TEXT, "block_id": "same"}], "x", "duplicate block_id"),
        ("not json", "x", "JSON array"),
    ],
)
async def test_invalid_blocks_are_refused_and_recorded(
    slack: FakeSlack, client: AsyncWebClient, blocks: Any, text: str | None, problem: str
):
    sdk_warns = pytest.warns(UserWarning) if text is None else contextlib.nullcontext()
    with sdk_warns:
        answer = await refused(client.chat_postMessage(channel="general", text=text, blocks=blocks))
    assert answer == "invalid_blocks"

    [violation] = slack.violations
    assert violation.method == "chat.postMessage" and problem in " ".join(violation.problems)
    assert slack.messages("general") == []
    assert problem in str(slack.calls[-1].response["detail"])
    slack.violations.clear()


async def test_a_trigger_opens_one_modal_within_three_seconds(
    slack: FakeSlack, client: AsyncWebClient, clock
):
    trigger = slack.issue_trigger_id(ALICE)
    clock.advance(3)
    opened = await client.views_open(trigger_id=trigger, view=small_modal())

    view = opened["view"]
    assert view["id"].startswith("V") and view["hash"] and view["state"] == {"values": {}}
    assert slack.current_modal("alice") == view == slack.last_view("alice")
    assert (
        await refused(client.views_open(trigger_id=trigger, view=small_modal()))
        == "exchanged_trigger_id"
    )
    late = slack.issue_trigger_id(ALICE)
    clock.advance(3.01)
    assert (
        await refused(client.views_open(trigger_id=late, view=small_modal()))
        == "expired_trigger_id"
    )
    assert (
        await refused(client.views_open(trigger_id="made-up", view=small_modal()))
        == "invalid_trigger_id"
    )


async def test_views_update_checks_the_hash_and_finds_external_ids(
    slack: FakeSlack, client: AsyncWebClient
):
    opened = (
        await client.views_open(
            trigger_id=slack.issue_trigger_id(BOB), view=small_modal(external_id="ext-1")
        )
    )["view"]

    by_external = await client.views_update(
        external_id="ext-1", view=small_modal("Second", external_id="ext-1")
    )
    assert (
        by_external["view"]["id"] == opened["id"]
        and by_external["view"]["title"]["text"] == "Second"
    )
    stale = client.views_update(
        view_id=opened["id"], hash=opened["hash"], view=small_modal("Third")
    )
    assert await refused(stale) == "hash_conflict"
    fresh = await client.views_update(
        view_id=opened["id"], hash=by_external["view"]["hash"], view=small_modal("Third")
    )
    assert slack.current_modal("bob") == fresh["view"]
    assert await refused(client.views_update(view_id="V0NOPE", view=small_modal())) == "not_found"


async def test_views_push_stops_at_three(slack: FakeSlack, client: AsyncWebClient):
    await client.views_open(trigger_id=slack.issue_trigger_id(ALICE), view=small_modal("One"))
    await client.views_push(trigger_id=slack.issue_trigger_id(ALICE), view=small_modal("Two"))
    await client.views_push(trigger_id=slack.issue_trigger_id(ALICE), view=small_modal("Three"))
    too_many = client.views_push(trigger_id=slack.issue_trigger_id(ALICE), view=small_modal("Four"))
    assert await refused(too_many) == "push_limit_reached"
    top = slack.current_modal("alice")
    assert top is not None and top["title"]["text"] == "Three"


async def test_views_publish_sets_the_home_tab(slack: FakeSlack, client: AsyncWebClient):
    home = {"type": "home", "blocks": [TEXT]}
    first = await client.views_publish(user_id=ALICE, view=home)
    second = await client.views_publish(user_id=ALICE, view=home, hash=first["view"]["hash"])
    assert first["view"]["id"] == second["view"]["id"] and slack.home("alice") == second["view"]
    assert slack.home("bob") is None
    assert (
        await refused(client.views_publish(user_id=ALICE, view=home, hash="stale"))
        == "hash_conflict"
    )


async def test_invalid_views_are_refused_and_recorded(slack: FakeSlack, client: AsyncWebClient):
    bad_views = [
        (
            {"type": "modal", "title": {"type": "plain_text", "text": "x" * 25}, "blocks": [TEXT]},
            "title",
        ),
        ({**small_modal(), "submit": None}, "needs a submit"),
        ({"type": "modal", "blocks": [TEXT]}, "needs a title"),
        ({**small_modal(), "blocks": [TEXT] * 101}, "at most 100"),
        ({"type": "home", "blocks": [TEXT]}, "view type must be 'modal'"),
    ]
    for view, problem in bad_views:
        answer = await refused(
            client.views_open(trigger_id=slack.issue_trigger_id(ALICE), view=view)
        )
        assert answer == "invalid_blocks"
        assert problem in " ".join(slack.violations[-1].problems), problem
    assert len(slack.violations) == len(bad_views)
    assert slack.current_modal("alice") is None
    slack.violations.clear()


async def test_fail_next_injects_errors_then_recovers(slack: FakeSlack, client: AsyncWebClient):
    slack.fail_next("chat.postMessage", error="channel_not_found", count=2)
    assert (
        await refused(client.chat_postMessage(channel="general", text="1")) == "channel_not_found"
    )
    assert (
        await refused(client.chat_postMessage(channel="general", text="2")) == "channel_not_found"
    )
    assert (await client.chat_postMessage(channel="general", text="3"))["ok"]
    assert [c.status for c in slack.calls_to("chat.postMessage")] == [200, 200, 200]


async def test_a_rate_limit_carries_retry_after_and_lasts_by_the_clock(
    slack: FakeSlack, client, clock
):
    slack.fail_next("views.publish", retry_after=2)
    home = {"type": "home", "blocks": [TEXT]}

    with pytest.raises(SlackApiError) as first:
        await client.views_publish(user_id=ALICE, view=home)
    clock.advance(1)
    with pytest.raises(SlackApiError) as second:
        await client.views_publish(user_id=ALICE, view=home)
    clock.advance(1)
    await client.views_publish(user_id=ALICE, view=home)

    assert (
        first.value.response.status_code == 429
        and first.value.response.headers["Retry-After"] == "2"
    )
    assert second.value.response.headers["Retry-After"] == "1"


async def test_scheduled_messages_post_when_their_time_comes(
    slack: FakeSlack, client: AsyncWebClient, clock
):
    post_at = int(clock.now().timestamp()) + 60
    scheduled = await client.chat_scheduleMessage(channel="general", post_at=post_at, text="later")
    assert scheduled["scheduled_message_id"] and slack.messages("general") == []
    assert (
        await refused(
            client.chat_scheduleMessage(channel="general", post_at=post_at - 120, text="x")
        )
        == "time_in_past"
    )

    clock.advance(60)
    [posted] = slack.deliver_scheduled()
    assert posted.text == "later" and slack.messages("general") == [posted]
    assert slack.calls[-1].method == "scheduled_message"


async def test_subscribers_see_every_call_until_they_unsubscribe(
    slack: FakeSlack, client: AsyncWebClient
):
    seen: list[ApiCall] = []
    unsubscribe = slack.subscribe(seen.append)
    await client.chat_postMessage(channel="general", text="one")
    unsubscribe()
    await client.chat_postMessage(channel="general", text="two")
    assert [c.args.get("text") for c in seen] == ["one"]


async def test_response_urls_reply_replace_delete_and_wear_out(slack: FakeSlack, clock):
    card = slack.post(channel="C0GENERAL", text="card", blocks=[TEXT], via="test")
    url = slack.issue_response_url(channel_id="C0GENERAL", user_id=ALICE, message_ts=card.ts)

    async with aiohttp.ClientSession() as session:

        async def post(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
            async with session.post(url, json=body) as resp:
                return resp.status, await resp.json()

        assert (await post({"text": "just you"}))[0] == 200
        assert (await post({"text": "everyone", "response_type": "in_channel"}))[0] == 200
        assert (await post({"text": "replaced", "replace_original": True}))[0] == 200
        assert (await post({"delete_original": True}))[0] == 200
        assert (await post({"text": "fifth"}))[0] == 200
        assert await post({"text": "sixth"}) == (404, {"ok": False, "error": "used_url"})

        fresh = slack.issue_response_url(channel_id="C0GENERAL", user_id=ALICE)
        clock.advance(30 * 60 + 1)
        async with session.post(fresh, json={"text": "late"}) as resp:
            assert resp.status == 404 and (await resp.json())["error"] == "expired_url"

    assert [m.text for m in slack.ephemerals("alice")] == ["just you", "fifth"]
    assert [m.text for m in slack.messages("general")] == ["everyone"]
    assert card.deleted and [v.text for v in card.edits] == ["card"] and card.text == "replaced"
