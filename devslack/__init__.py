"""devslack: a local stand-in for Slack.

`FakeSlack` serves the Web API and response_urls on 127.0.0.1 and records everything;
`SlackRequests` sends the bot exactly what Slack would (signed slash commands, clicks, view
submissions, events); `LocalWorkspace` with `terminal.run_repl` puts both in a terminal, and
`BrowserWorkspace` (browser.py) in a browser page that looks like Slack, so the bot can be used
without Slack credentials. Generic over Slack's protocol: nothing here knows what the bot does.

Owns: the stand-in's Web API, Socket Mode and request signing, its store, its terminal and its
browser page (static/: HTML, CSS and a script, no build step).
May import: devslack and bot.clock; local.py, the local workspace's entry point, also the bot
(bot.app.runtime, bot.config) to run it beside the stand-in, and simulation.py (its `sim`
controls) the sweeps it runs as the clock moves. The product reaches this package only
through bot.app.devtools.
"""

from devslack.blockkit import Button
from devslack.browser import BrowserWorkspace
from devslack.models import (
    DEFAULT_CHANNELS,
    DEFAULT_USERS,
    ApiCall,
    Message,
    SlackUser,
    Violation,
)
from devslack.reply import Reply
from devslack.requests import SlackRequests, signed_headers
from devslack.terminal import run_repl
from devslack.webapi import FakeSlack, MonotonicClock
from devslack.workspace import LocalWorkspace

__all__ = [
    "DEFAULT_CHANNELS",
    "DEFAULT_USERS",
    "ApiCall",
    "BrowserWorkspace",
    "Button",
    "FakeSlack",
    "LocalWorkspace",
    "Message",
    "MonotonicClock",
    "Reply",
    "SlackRequests",
    "SlackUser",
    "Violation",
    "run_repl",
    "signed_headers",
]
