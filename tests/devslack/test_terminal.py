"""The terminal workspace, driven by a script of typed lines against the demo Bolt app."""

from __future__ import annotations

import asyncio
import io
from typing import Any

import pytest_asyncio
from slack_sdk.web.async_client import AsyncWebClient

from devslack import FakeSlack
from devslack.render import mrkdwn
from devslack.terminal import Terminal, run_repl
from devslack.workspace import LocalWorkspace

from .conftest import SECRET, Demo, form_view


@pytest_asyncio.fixture
async def workspace(slack: FakeSlack, events_url: str):
    async with LocalWorkspace(
        slack=slack,
        events_url=events_url,
        signing_secret=SECRET,
        approvers=["bob"],
        settle_quiet=0.05,
    ) as local:
        yield local
        await slack.settle()


async def transcript(workspace: LocalWorkspace, *lines: str) -> str:
    output = io.StringIO()
    await run_repl(
        workspace, input=io.StringIO("".join(line + "\n" for line in lines)), output=output
    )
    return output.getvalue()


def after(text: str, marker: str) -> str:
    """The transcript from the line typed as `marker` on."""
    assert marker in text, f"{marker!r} not in transcript:\n{text}"
    return text[text.index(marker) :]


async def test_a_newcomer_session(workspace: LocalWorkspace, slack: FakeSlack):
    text = await transcript(
        workspace,
        "/demo",
        "press 1",  # Open form → the modal is prompted field by field
        "bad",  # Name
        "",  # Size: keep Small
        "Grace",  # Name again, after the bot's validation error
        "2",  # Size: Large
        "as bob",
        "press 2",  # Dismiss, with a confirm dialog
        "n",
        "press 2",
        "y",
        "press 2",
        "/echo hi there",
        "quit",
    )

    assert "bob      U0BOB      Bob Baker  approver" in text
    assert "You are alice, in #general." in text
    card = after(text, "alice@#general> /demo")
    assert "#general · devslack-bot:\n  == Demo card ==\n  Hello @alice, pick one.\n" in card
    assert "[1] Open form (primary)  [2] Dismiss (danger)" in card

    form = after(text, "> press 1")
    assert "┌ modal “Demo form” for @alice\n│  Name: Ada\n│  Size: Small\n└ [Send] [Cancel]" in form
    assert "  Name [Ada]: bad\n    1) Small  2) Large\n  Size [Small]: \n" in form
    assert "  ! Name cannot be bad\n  Name [bad]: Grace\n" in form
    assert "DM to @alice · devslack-bot:\n  Thanks Grace: large" in form
    assert "› thread" in form and "Form sent by @alice" in form

    dismiss = after(text, "as bob")
    assert "You are now bob (U0BOB) (approver)." in dismiss
    assert (
        "? Dismiss the card?: It cannot come back.\n  Dismiss (y) / Keep (n)? n\n  (cancelled)"
        in dismiss
    )
    assert "#general · devslack-bot (✎ edited):\n  · Dismissed by @bob" in dismiss
    assert "? button [2] is no longer there" in dismiss
    assert "#general · devslack-bot (only visible to @bob):\n  echo: hi there" in dismiss
    assert text.endswith("bob@#general> quit\nbye\n")

    assert [m.text for m in slack.dms("alice")] == ["Thanks Grace: large"]
    assert slack.messages("general")[0].text == "Dismissed"


async def test_channels_home_and_hints(workspace: LocalWorkspace):
    text = await transcript(
        workspace,
        "#random",
        "#ops",
        "home",
        "press 1",
        "press 9",
        "hello",
        "as zed",
        "/nothing",
        "help",
    )

    assert "Now in #random." in text
    assert "Now in #ops (new channel" in text
    assert "┌ App Home of @alice\n│  Your clusters: none\n│  [1] Refresh\n└" in text
    assert "? there is no button [9]" in text
    assert "? commands start with /" in text
    assert "? nobody called 'zed'; people here: alice, bob, carol" in text
    assert "⚠ the bot answered HTTP 404" in text
    assert "press N         click button [N]" in text
    assert text.endswith("alice@#ops> \nbye\n")  # end of input quits


async def test_only_the_recipient_can_press_an_ephemeral(workspace: LocalWorkspace, demo: Demo):
    @demo.app.command("/secret")
    async def secret(ack: Any, command: dict[str, Any], client: AsyncWebClient) -> None:
        await ack()
        button = {
            "type": "button",
            "action_id": "open_form",
            "text": {"type": "plain_text", "text": "Go"},
        }
        await client.chat_postEphemeral(
            channel=command["channel_id"],
            user=command["text"],
            text="for you",
            blocks=[{"type": "actions", "elements": [button]}],
        )

    text = await transcript(workspace, "/secret U0BOB", "press 1", "as bob", "press 1", "/close")

    assert "#general · devslack-bot (only visible to @bob):\n  [1] Go" in text
    assert "? only @bob can see that message: `as bob` first" in text
    assert "┌ modal “Demo form” for @bob" in text and "(closed “Demo form”)" in text


async def test_a_modal_can_be_closed_while_filling_it(workspace: LocalWorkspace, slack: FakeSlack):
    text = await transcript(workspace, "/demo", "press 1", "/close", "close")
    assert "(closed “Demo form”)" in text
    assert "? you have no modal open" in text
    assert slack.current_modal("alice") is None


def test_mrkdwn_is_made_readable():
    names = {"U1": "alice", "C1": "general"}.__getitem__
    raw = "<@U1> in <#C1> at <!date^1700000000^{date}|Nov 14> see <https://x.io|docs> &lt;ok&gt;"
    raw += " <!here>"
    assert mrkdwn(raw, names) == "@alice in #general at Nov 14 see docs (https://x.io) <ok> @here"


async def test_press_by_label_prefers_this_channel_and_says_where(
    workspace: LocalWorkspace, slack: FakeSlack
):
    # Two cards with a Dismiss: the newer one in #random, the one alice is looking at in
    # #general. `press Dismiss` in #general means this channel's.
    text = await transcript(
        workspace, "/demo", "#random", "/demo", "#general", "press Dismiss", "y", "press 3",
        "/close",
    )

    assert slack.messages("general")[0].text == "Dismissed"
    assert slack.messages("random")[0].text == "Demo card"
    assert "  (pressing [2] Dismiss in #general)" in after(text, "> press Dismiss")
    assert "  (pressing [3] Open form in #random)" in after(text, "> press 3")


async def test_a_form_opened_after_a_slow_ack_is_filled_at_once(
    slack: FakeSlack, demo: Demo, events_url: str
):
    # Under load the bot's views.open comes later than FakeSlack's quiet spell: the terminal
    # waits for the bot (its `settle`), not for the quiet spell alone, before it fills the form.
    idle = asyncio.Event()
    idle.set()

    @demo.app.command("/slowform")
    async def slow_form(ack: Any, body: dict[str, Any], client: AsyncWebClient) -> None:
        idle.clear()
        try:
            await ack()
            await asyncio.sleep(0.5)  # ten quiet spells of this workspace
            await client.views_open(trigger_id=body["trigger_id"], view=form_view("C0GENERAL|1"))
        finally:
            idle.set()

    class WaitsForTheBot(Terminal):
        async def settle(self) -> None:  # as the local workspace's, which waits for its bot
            await self.ws.settle()
            await idle.wait()
            await self.ws.settle()

    async with LocalWorkspace(slack=slack, events_url=events_url, signing_secret=SECRET,
                              settle_quiet=0.05) as local:
        output = io.StringIO()
        await WaitsForTheBot(local, input=io.StringIO("/slowform\n/close\nquit\n"),
                             output=output).run()
        await slack.settle()
    text = output.getvalue()
    assert "Filling in “Demo form”" in text
    assert "  Name [Ada]: /close\n  (closed “Demo form”)" in text
    assert "? commands start with /" not in text and "HTTP 404" not in text
