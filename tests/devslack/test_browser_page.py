"""The browser workspace without a browser: its HTML (Block Kit and mrkdwn as Slack draws them)
and its server's API, driven against the demo Bolt app (conftest.py). The page in a real
Chromium: test_browser.py."""

from __future__ import annotations

import asyncio
import html
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest_asyncio
from slack_sdk.web.async_client import AsyncWebClient

from devslack import FakeSlack
from devslack.browser import BrowserWorkspace
from devslack.html_blocks import Directory, blocks_html
from devslack.html_text import mrkdwn_html
from devslack.workspace import LocalWorkspace

from .conftest import SECRET

NAMES = {"U0ALICE": "alice", "C0GENERAL": "general"}


def names(some_id: str) -> str:
    return NAMES.get(some_id, some_id)


def text(kind: str, value: str) -> dict[str, Any]:
    return {"type": kind, "text": value}


def option(value: str, label: str) -> dict[str, Any]:
    return {"value": value, "text": text("plain_text", label)}


def test_mrkdwn_reads_as_slack_shows_it():
    shown = mrkdwn_html(
        "*Running* _since_ ~never~ `clu_1` <@U0ALICE> in <#C0GENERAL> <!here> "
        "<https://x.io/?a=1&amp;b=2|the docs> :large_green_circle: :no_such_emoji: "
        "&lt;script&gt;alert(1)&lt;/script&gt; 2*3*4\n```ssh -p 22 root@h```", names)
    assert "<b>Running</b> <i>since</i> <s>never</s> <code>clu_1</code>" in shown
    assert '<span class="mention">@alice</span> in <span class="mention">#general</span>' in shown
    assert '<span class="mention">@here</span>' in shown
    assert ('<a href="https://x.io/?a=1&amp;b=2" target="_blank" rel="noopener noreferrer">'
            "the docs</a>") in shown
    assert "🟢 :no_such_emoji:" in shown
    assert "&lt;script&gt;alert(1)&lt;/script&gt; 2*3*4" in shown  # text, never markup
    assert "<pre>ssh -p 22 root@h</pre>" in shown


def test_every_block_and_element_is_drawn_wired_for_the_page():
    confirm = {"title": text("plain_text", "Terminate?"),
               "text": text("mrkdwn", "It bills *$62.43/h* until then."),
               "confirm": text("plain_text", "Terminate"), "deny": text("plain_text", "Keep"),
               "style": "danger"}
    sizes = [option("s", "Small"), option("l", "Large")]
    blocks = [
        {"type": "header", "text": text("plain_text", "Cluster :rocket:")},
        {"type": "section", "block_id": "sec", "text": text("mrkdwn", "*Status*"),
         "fields": [text("mrkdwn", "*Rate*\n$62.43/h"), text("plain_text", "us-tx")],
         "accessory": {"type": "button", "action_id": "go", "style": "primary", "value": "v1",
                       "text": text("plain_text", "Approve"), "confirm": confirm}},
        {"type": "divider"},
        {"type": "context", "elements": [
            {"type": "image", "image_url": "https://x.io/a.png", "alt_text": "avatar"},
            text("mrkdwn", "Requested by <@U0ALICE>")]},
        {"type": "image", "image_url": "https://x.io/chart.png", "alt_text": "billed hours",
         "title": text("plain_text", "Spend")},
        {"type": "actions", "block_id": "act", "elements": [
            {"type": "button", "action_id": "stop", "style": "danger",
             "text": text("plain_text", "Terminate")},
            {"type": "static_select", "action_id": "size", "options": sizes,
             "initial_option": sizes[1], "placeholder": text("plain_text", "Pick a size")},
            {"type": "overflow", "action_id": "more", "options": sizes}]},
        {"type": "input", "block_id": "name", "optional": True,
         "label": text("plain_text", "Cluster name"), "hint": text("plain_text", "Lower case"),
         "element": {"type": "plain_text_input", "action_id": "v", "initial_value": "demo",
                     "placeholder": text("plain_text", "dsv3-serve")}},
        {"type": "input", "block_id": "keys", "label": text("plain_text", "SSH keys"),
         "element": {"type": "plain_text_input", "action_id": "v", "multiline": True}},
        {"type": "input", "block_id": "auto", "label": text("plain_text", "Recovery"),
         "element": {"type": "checkboxes", "action_id": "v", "options": sizes,
                     "initial_options": [sizes[0]]}},
        {"type": "input", "block_id": "pick", "label": text("plain_text", "One"),
         "element": {"type": "radio_buttons", "action_id": "v", "options": sizes}},
        {"type": "input", "block_id": "who", "label": text("plain_text", "Who"),
         "element": {"type": "users_select", "action_id": "v", "initial_user": "U0ALICE"}},
        {"type": "input", "block_id": "day", "label": text("plain_text", "Day"),
         "element": {"type": "datepicker", "action_id": "v", "initial_date": "2026-12-02"}},
    ]
    shown = blocks_html(blocks, Directory(names=names, people=[("U0ALICE", "alice")]))
    assert '<div class="block header">Cluster 🚀</div>' in shown
    assert '<div class="text"><b>Status</b></div><div class="fields">' in shown
    assert '<div class="field"><b>Rate</b><br>$62.43/h</div>' in shown
    button = shown[shown.index('<button type="button" class="btn btn-primary"'):]
    assert 'data-block="sec" data-action="go" data-kind="button" data-live' in button
    assert 'data-value="v1">Approve</button>' in button
    dialog = json.loads(html.unescape(button.split('data-confirm="')[1].split('"')[0]))
    assert dialog == {"title": "Terminate?", "text": "It bills <b>$62.43/h</b> until then.",
                      "confirm": "Terminate", "deny": "Keep", "style": "danger"}
    assert '<hr class="block divider">' in shown
    assert '<img class="tiny" src="https://x.io/a.png" alt="avatar"' in shown
    assert 'Requested by <span class="mention">@alice</span>' in shown
    assert '<div class="title">Spend</div><img class="full" src="https://x.io/chart.png"' in shown
    assert 'class="btn btn-danger" data-block="act" data-action="stop"' in shown
    assert '<option value="l" selected>Large</option>' in shown
    assert '<select class="overflow"' in shown and ">⋯</option>" in shown
    assert ('<label class="label">Cluster name <span class="optional">(optional)</span></label>'
            in shown)
    assert 'placeholder="dsv3-serve" value="demo"' in shown and "data-input" in shown
    assert '<div class="hint">Lower case</div>' in shown
    assert '<textarea class="text-input" rows="3"' in shown
    assert 'type="checkbox" name=' in shown and 'value="s" checked>' in shown
    assert 'type="radio"' in shown
    assert '<option value="U0ALICE" selected>alice</option>' in shown
    assert '<input class="text-input" type="date" value="2026-12-02"' in shown


# -- the server --------------------------------------------------------------------------------


@pytest_asyncio.fixture
async def page(slack: FakeSlack, events_url: str) -> AsyncIterator[BrowserWorkspace]:
    async def sim(line: str, say: Any) -> str:
        say("  (moving the clocks…)")
        return f"done: {line}"

    async with LocalWorkspace(slack=slack, events_url=events_url, signing_secret=SECRET,
                              approvers=["bob"], settle_quiet=0.05) as local, \
            BrowserWorkspace(local, lines={"sim": sim},
                             controls=[("+1 h", "sim advance 1h")]) as served:
        yield served
        await slack.settle()


class Page:
    """What the page's script does, over HTTP."""

    def __init__(self, served: BrowserWorkspace, session: aiohttp.ClientSession) -> None:
        self.base = served.url.split("/?")[0]
        self.token = served.token
        self.http = session

    async def state(self, user: str, place: str = "C0GENERAL", **query: str) -> dict[str, Any]:
        async with self.http.get(f"{self.base}/api/state", params={
                "user": user, "place": place, "token": self.token, **query}) as response:
            assert response.status == 200, await response.text()
            return dict(await response.json())

    async def post(self, path: str, body: dict[str, Any], status: int = 200) -> dict[str, Any]:
        async with self.http.post(f"{self.base}/api/{path}", json=body,
                                  headers={"X-Devslack-Token": self.token}) as response:
            assert response.status == status, await response.text()
            return dict(await response.json())


async def test_the_page_drives_the_bot_as_slack_would(page: BrowserWorkspace, slack: FakeSlack):
    async with aiohttp.ClientSession() as session:
        web = Page(page, session)
        async with session.get(f"{web.base}/api/state", params={"user": "U0ALICE"}) as refused:
            assert refused.status == 403  # no token: another page can't read the workspace
        async with session.get(f"{web.base}/") as index, \
                session.get(f"{web.base}/static/workspace.js") as script:
            assert index.status == script.status == 200
            assert '<script src="/static/workspace.js">' in await index.text()

        await web.post("command", {"user": "U0ALICE", "place": "C0GENERAL", "text": "/demo"})
        await slack.settle()
        alice = await web.state("U0ALICE")
        assert "# general" in alice["sidebar"] and alice["title"] == "# general"
        assert '<div class="block header">Demo card</div>' in alice["messages"]
        card = slack.messages("general")[-1]
        await web.post("click", {"user": "U0ALICE", "channel": card.channel, "ts": card.ts,
                                 "block": "card_actions", "action": "open_form"})
        await slack.settle()
        form = (await web.state("U0ALICE"))["modal"]
        assert form is not None and "Demo form" in form["html"] and 'value="Ada"' in form["html"]
        assert (await web.state("U0BOB"))["modal"] is None  # alice's modal, not bob's

        sent = await web.post("submit", {"user": "U0ALICE", "view": form["id"],
                                         "values": {"name": {"value": "bad"}}})
        assert sent["errors"] == {"name": "Name cannot be bad"}
        await web.post("submit", {"user": "U0ALICE", "view": form["id"],
                                  "values": {"name": {"value": "Grace"},
                                             "size": {"value": "large"}}})
        await slack.settle()
        dm = await web.state("U0ALICE", place="dm")
        assert dm["place"] == "D0ALICE" and "Thanks Grace: large" in dm["messages"]
        assert dm["modal"] is None
        assert "1 reply" in (await web.state("U0ALICE"))["messages"]
        thread = await web.state("U0ALICE", thread=card.ts)
        assert "Form sent by" in thread["thread"]
        bob = await web.state("U0BOB", place="D0ALICE")  # not his DM: he lands in a channel
        assert bob["place"] == "C0GENERAL" and "Thanks Grace" not in bob["messages"]

        await web.post("command", {"user": "U0ALICE", "place": "C0GENERAL", "text": "/echo hi"})
        await web.post("command", {"user": "U0ALICE", "place": "C0GENERAL",
                                   "text": "sim advance 1h"})
        await slack.settle()
        alice = await web.state("U0ALICE")
        assert "echo: hi" in alice["messages"] and "Only visible to you" in alice["messages"]
        assert "› sim advance 1h\n  (moving the clocks…)\ndone: sim advance 1h" in \
            alice["messages"]
        assert alice["controls"] == [{"label": "+1 h", "line": "sim advance 1h"}]
        bob = await web.state("U0BOB")
        assert "echo: hi" not in bob["messages"] and "done: sim" not in bob["messages"]
        echo = next(m for m in slack.ephemerals("alice") if m.text == "echo: hi")
        gone = await web.post("click", {"user": "U0BOB", "channel": echo.channel, "ts": echo.ts,
                                        "block": "x", "action": "open_form"}, status=409)
        assert gone == {"error": "that message is gone"}  # alice's ephemeral: not his to press


async def test_the_page_follows_the_workspace_live_and_shows_charts(
        page: BrowserWorkspace, slack: FakeSlack, client: AsyncWebClient):
    async with aiohttp.ClientSession() as session:
        web = Page(page, session)
        async with session.get(f"{web.base}/api/events", params={"token": web.token}) as events:
            first = await events.content.readline()
            assert first.startswith(b"data: ")
            png = b"\x89PNG\r\n\x1a\n" + bytes(64)
            await client.files_upload_v2(channel="C0GENERAL", file=png, filename="spend.png",
                                         title="Spend by day")
            await events.content.readline()  # the blank line ending the first event
            pushed = await asyncio.wait_for(events.content.readline(), 5)
            assert int(pushed.removeprefix(b"data: ")) > int(first.removeprefix(b"data: "))
        shown = (await web.state("U0ALICE"))["messages"]
        assert '<div class="file-title">Spend by day</div>' in shown
        source = shown.split('<img class="upload" src="')[1].split('"')[0].replace("&amp;", "&")
        async with session.get(f"{web.base}{source}") as image:
            assert image.status == 200 and image.content_type == "image/png"
            assert await image.read() == png
        unread = await web.state("U0BOB", place="C0RANDOM")
        assert '<span class="badge">1</span>' in unread["sidebar"]  # #general: one new
