"""The workspace in a terminal: a line-oriented REPL that also works through a pipe.

    alice@#general> /cluster quote h100x8 nodes=4
    alice@#general> as bob
    bob@#general> press 3

Output comes from `Screen`, subscribed to FakeSlack, so whatever the bot posts shows up as it
happens. Before each prompt the REPL lets FakeSlack settle, so a script piped in sees the
bot's follow-ups to one line before the next line runs.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable
from typing import Any, TextIO

from devslack.blockkit import (
    FILLABLE,
    MULTI_CHOICE,
    PICKED,
    SINGLE_CHOICE,
    initial_value,
    options_of,
    plain,
    walk,
)
from devslack.models import Message, SlackError
from devslack.render import display_value, text_of
from devslack.reply import Reply
from devslack.screen import ButtonRef, Screen
from devslack.workspace import LocalWorkspace

HELP = """\
  /command text   run a slash command as you, here   (e.g. /cluster quote h100x8 nodes=4)
  press N         click button [N]
  press LABEL     click the button labelled LABEL you can see (press Approve): in the modal
                  you have open, else in this channel, else elsewhere; the newest first
  submit | close  fill in and submit / dismiss the modal you have open
  home            open the app's Home tab
  as NAME         become someone else (as bob, as U0BOB)
  #channel        go to a channel (created if new)
  who             who is who, and who approves
  help | quit"""

_CLOSE = object()  # typed `/close` (or end of input) while filling a modal


class Terminal:
    """A REPL over a `LocalWorkspace`: reads commands, prints everything the bot does."""

    def __init__(self, workspace: LocalWorkspace, *, input: TextIO, output: TextIO) -> None:
        self.ws = workspace
        self.screen = Screen(workspace.slack, output)
        self._in = input
        self._echo = not _is_tty(input)  # piped input is not echoed by a terminal

    async def run(self) -> None:
        unsubscribe = self.ws.slack.subscribe(self.screen.on_call)
        try:
            self._banner()
            while True:
                await self.settle()
                line = await self._read(f"{self.ws.user.name}@{self.ws.channel_label}> ")
                if line is None or not await self.handle(line.strip()):
                    break
        finally:
            unsubscribe()
        self.screen.say("bye")

    async def settle(self) -> None:
        """Before each prompt: the bot's follow-ups to the last line have landed."""
        await self.ws.settle()

    async def handle(self, line: str) -> bool:
        """Run one line; False means quit."""
        word, _, rest = line.partition(" ")
        if not line:
            return True
        if line in ("quit", "exit"):
            return False
        if line == "help":
            self.screen.say(HELP)
        elif line.startswith("/"):
            await self._act(self.ws.command(line))
        elif line.startswith("#"):
            self._switch_channel(line)
        elif word == "as" and rest.strip():
            self._switch_user(rest.strip())
        elif line == "who":
            self._who()
        elif word == "press" and rest.strip().isdigit():
            await self._press(int(rest))
        elif word == "press" and rest.strip():
            await self._press_label(rest.strip())
        elif line == "home":
            await self._act(self.ws.open_home())
        elif line == "submit":
            await self._fill_modal()
        elif line == "close":
            await self._close_modal()
        else:
            self.screen.say("? commands start with / (e.g. /cluster help); type `help` for more")
        return True

    # -- people and places -------------------------------------------------------------------

    def _banner(self) -> None:
        slack = self.ws.slack
        self.screen.say(f"devslack: a local Slack workspace ({slack.team_id}); the bot's Web API")
        self.screen.say(f"calls land on {slack.api_url}. Type `help` for commands.")
        self._who()

    def _who(self) -> None:
        for user, approver in self.ws.people():
            tags = ("  approver" if approver else "") + ("  ← you" if user == self.ws.user else "")
            self.screen.say(f"  {user.name:<8} {user.id:<10} {user.real_name}{tags}")
        self.screen.say(f"You are {self.ws.user.name}, in {self.ws.channel_label}.")

    def _switch_user(self, ref: str) -> None:
        try:
            user = self.ws.switch_user(ref)
        except LookupError:
            names = ", ".join(u.name for u, _ in self.ws.people())
            self.screen.say(f"? nobody called {ref!r}; people here: {names}")
            return
        role = " (approver)" if user.id in self.ws.approvers else ""
        self.screen.say(f"You are now {user.name} ({user.id}){role}.")

    def _switch_channel(self, ref: str) -> None:
        channel_id, created = self.ws.switch_channel(ref)
        note = f" (new channel {channel_id})" if created else ""
        self.screen.say(f"Now in {self.ws.channel_label}{note}.")

    # -- buttons -----------------------------------------------------------------------------

    async def _press(self, number: int) -> None:
        ref = self.screen.buttons.get(number)
        if ref is None:
            self.screen.say(f"? there is no button [{number}]")
            return
        surface = self._surface(ref)
        if surface is None:
            return
        blocks = surface.blocks if isinstance(surface, Message) else surface["blocks"]
        found = _find(blocks, ref)
        if found is None:
            self.screen.say(f"? button [{number}] is no longer there")
            return
        block, element = found
        self.screen.say(f"  (pressing [{number}] {ref.label} {self._where(ref)})")
        confirm = element.get("confirm")
        if isinstance(confirm, dict) and not await self._confirmed(confirm):
            self.screen.say("  (cancelled)")
            return
        await self._act(self.ws.click(surface, ref.action_id, block_id=block.get("block_id")))

    async def _press_label(self, label: str) -> None:
        """`press Approve`: the button with that text (any case; or starting with it,
        `press Recover now` for "Recover now (one attempt)") that the current user can see and
        that is still there — where they are looking first: the modal they have open, then
        this channel, then the other channels and DMs, then their App Home; the newest first
        in each. What a person means by "press Approve"."""
        wanted = label.casefold()
        visible = sorted(((self._nearness(ref), -number, number)
                          for number, ref in self.screen.buttons.items() if self._visible(ref)))
        for exact in (True, False):
            number = next((n for _, _, n in visible
                           if (text := self.screen.buttons[n].label.casefold()) == wanted
                           or (not exact and text.startswith(wanted + " "))), None)
            if number is not None:
                await self._press(number)
                return
        self.screen.say(f"? there is no button “{label}” you can see")

    def _nearness(self, ref: ButtonRef) -> int:
        """0: the open modal, 1: this channel, 2: another channel or DM, 3: the App Home."""
        if ref.view_id is not None:
            modal = self.ws.current_modal()
            return 0 if modal is not None and modal["id"] == ref.view_id else 3
        return 1 if ref.channel == self.ws.channel else 2

    def _where(self, ref: ButtonRef) -> str:
        """Where a button is, in words: `in #approvals`, `in your App Home`, …"""
        if ref.view_id is not None:
            view = self.ws.slack.view(ref.view_id)
            if view.get("type") == "home":
                return "in your App Home"
            return f"in the modal “{plain(view.get('title'))}”"
        message = self.ws.slack.find_message(str(ref.channel), str(ref.ts))
        mine = self.ws.slack.dm_user(str(ref.channel)) == self.ws.user.id
        place = "your DM with the app" if mine else self.screen.where(str(ref.channel))
        if message is not None and message.is_reply:
            place += " (in a thread)"
        return f"in {place}"

    def _visible(self, ref: ButtonRef) -> bool:
        me = self.ws.user.id
        if ref.view_id is not None:
            return (self.ws.slack.view_owner(ref.view_id) == me
                    and self.ws.slack.is_open(ref.view_id))
        message = self.ws.slack.find_message(str(ref.channel), str(ref.ts))
        dm_of = self.ws.slack.dm_user(str(ref.channel))
        return (message is not None and not message.deleted
                and message.ephemeral_to in (None, me) and dm_of in (None, me)
                and _find(message.blocks, ref) is not None)

    def _surface(self, ref: ButtonRef) -> Message | dict[str, Any] | None:
        """The message or view a button lives on, if the current user can see it."""
        me = self.ws.user
        if ref.view_id is not None:
            view = self.ws.slack.view(ref.view_id)
            owner = self.ws.slack.view_owner(ref.view_id)
            if owner != me.id or not self.ws.slack.is_open(ref.view_id):
                self.screen.say(
                    f"? that screen is not open for you (it was @{self.screen.name(owner)}'s)"
                )
                return None
            return view
        message = self.ws.slack.find_message(str(ref.channel), str(ref.ts))
        if message is None or message.deleted:
            self.screen.say("? that message is gone")
            return None
        if message.ephemeral_to not in (None, me.id):
            who = self.screen.name(str(message.ephemeral_to))
            self.screen.say(f"? only @{who} can see that message: `as {who}` first")
            return None
        return message

    async def _confirmed(self, confirm: dict[str, Any]) -> bool:
        self.screen.say(
            f"  ? {plain(confirm.get('title'))}: {text_of(confirm.get('text'), self.screen.name)}"
        )
        yes, no = plain(confirm.get("confirm")) or "Yes", plain(confirm.get("deny")) or "No"
        answer = await self._read(f"  {yes} (y) / {no} (n)? ")
        return (answer or "").strip().lower() in ("y", "yes")

    async def _act(self, request: Awaitable[Reply]) -> None:
        """Send a request; report a bad ack, let the bot finish, fill in a modal it opened."""
        before = self.ws.current_modal()
        self._check(await request)
        # The bot's own follow-ups too (a modal opened after a slow ack), not FakeSlack's
        # quiet spell alone: on a busy machine the modal can come later than the spell.
        await self.settle()
        now = self.ws.current_modal()
        if now is not None and (before is None or before["hash"] != now["hash"]):
            await self._fill_modal()

    def _check(self, reply: Reply) -> bool:
        """Say what went wrong with an ack, as Slack would show it; True if nothing did."""
        if reply.problem is not None:
            self.screen.say(reply.problem)
        return reply.problem is None

    # -- modals ------------------------------------------------------------------------------

    async def _fill_modal(self) -> None:
        """Prompt for every input of the open modal and submit, until it closes."""
        typed: dict[tuple[str, str], Any] = {}
        errors: dict[str, str] = {}
        while (view := self.ws.current_modal()) is not None:
            inputs = [(b, e) for b, e in walk(view["blocks"]) if b.get("type") == "input"]
            inputs = [(b, e) for b, e in inputs if e.get("type") in FILLABLE]
            if not inputs:
                self.screen.say("  (nothing to fill in: press its buttons, or `submit` / `close`)")
                return
            self.screen.say(
                f"Filling in “{plain(view.get('title'))}”: Enter keeps [the value], /close cancels"
            )
            values: dict[str, dict[str, Any]] = {}
            for block, element in inputs:
                key = (str(block["block_id"]), str(element["action_id"]))
                current = typed.get(key, initial_value(element))
                answer = await self._ask(block, element, current, errors.get(key[0]))
                if answer is _CLOSE:
                    await self._close_modal()
                    return
                typed[key] = answer
                values.setdefault(key[0], {})[key[1]] = answer
            reply = await self.ws.submit(view, values)
            if not self._check(reply):
                return
            errors = _form_errors(reply.json)
            await self.settle()
            if errors:
                self.screen.say("✗ the bot sent the form back: fix the fields marked !")
            elif self.ws.current_modal() == view:  # the bot's answer changed nothing
                self.screen.say("  (the modal is still open: `submit` again or `close` it)")
                return

    async def _ask(
        self, block: dict[str, Any], element: dict[str, Any], current: Any, error: str | None
    ) -> Any:
        label = text_of(block.get("label"), self.screen.name)
        kind = element.get("type")
        options = options_of(element)
        if options:
            choices = "  ".join(f"{i}) {plain(o.get('text'))}" for i, o in enumerate(options, 1))
            self.screen.say(f"    {choices}")
        while True:
            prefix = f"  ! {error}\n" if error else ""
            line = await self._read(f"{prefix}  {label} [{display_value(element, current)}]: ")
            if line is None or line.strip() == "/close":
                return _CLOSE
            answer = line.strip()
            if not answer:
                return current
            if kind in SINGLE_CHOICE or kind in MULTI_CHOICE:
                picked = [_pick(options, part.strip()) for part in answer.split(",")]
                if None in picked or (kind in SINGLE_CHOICE and len(picked) != 1):
                    error = "type the number of an option" + (
                        " (or several, 1,3)" if kind in MULTI_CHOICE else ""
                    )
                    continue
                return picked[0] if kind in SINGLE_CHOICE else picked
            if kind == "users_select" or PICKED.get(str(kind)) == "selected_users":
                try:
                    ids = [self.ws.slack.user(p.strip()).id for p in answer.split(",")]
                except SlackError:
                    error = "type a name, e.g. bob"
                    continue
                return ids[0] if kind == "users_select" else ids
            return answer

    async def _close_modal(self) -> None:
        view = self.ws.current_modal()
        if view is None:
            self.screen.say("? you have no modal open")
            return
        reply = await self.ws.close(view)
        self.screen.say(f"  (closed “{plain(view.get('title'))}”)")
        if reply is not None and reply.status != 200:
            self.screen.say(f"⚠ the bot answered HTTP {reply.status} to view_closed")

    # -- input -------------------------------------------------------------------------------

    async def _read(self, prompt: str) -> str | None:
        """One line of input (None at end of input), echoed when it comes from a pipe."""
        self.screen.write(prompt)
        line = await asyncio.to_thread(self._in.readline)
        if not line:
            self.screen.say("")
            return None
        if self._echo:
            self.screen.write(line if line.endswith("\n") else line + "\n")
        return line.rstrip("\n")


def _find(
    blocks: list[dict[str, Any]], ref: ButtonRef
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The button a number pointed at; by action_id alone if its block was rebuilt since."""
    matches = [(b, e) for b, e in walk(blocks) if e.get("action_id") == ref.action_id]
    exact = [(b, e) for b, e in matches if b.get("block_id") == ref.block_id]
    return next(iter(exact or matches), None)


def _pick(options: list[dict[str, Any]], typed: str) -> str | None:
    """An option's value from its number, its value or its label."""
    if typed.isdigit() and 1 <= int(typed) <= len(options):
        return str(options[int(typed) - 1].get("value"))
    for option in options:
        if typed in (option.get("value"), plain(option.get("text"))):
            return str(option.get("value"))
    return None


def _form_errors(content: Any) -> dict[str, str]:
    """`{block_id: message}` of a `response_action: errors` ack, else empty."""
    if isinstance(content, dict) and content.get("response_action") == "errors":
        return {str(k): str(v) for k, v in (content.get("errors") or {}).items()}
    return {}


def _is_tty(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


async def run_repl(
    workspace: LocalWorkspace, *, input: TextIO = sys.stdin, output: TextIO = sys.stdout
) -> None:
    """Run the terminal workspace until `quit` or end of input."""
    await Terminal(workspace, input=input, output=output).run()
