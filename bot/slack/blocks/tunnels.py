"""The connection DM's ports: one ready `ssh -L` line each (the owner's DM only)."""

from __future__ import annotations

from slack_sdk.models.blocks import Block

from bot.domain.connection import ConnectionDetails
from bot.domain.tunnels import tunnel_lines
from bot.slack.blocks.format import *
from bot.slack.blocks.message import *

SECTION_BUDGET = 2900


def tunnel_blocks(details: ConnectionDetails) -> list[Block]:
    """The ports the launch asked for, through the primary's SSH; none when it has none (or no
    SSH address yet)."""
    if details.primary_host is None or details.primary_port is None:
        return []
    found = tunnel_lines(details.ports, host=details.primary_host,
                         ssh_port=details.primary_port, user=details.primary_user or "root")
    lines = fit_lines([f"• {code(escaped(port, 20))}: {code(escaped(line, 300))}"
                       for port, line in found], SECTION_BUDGET, "…and {n} more ports")
    if not lines:
        return []
    return [section("*Ports* — forward each through the primary's SSH, then open "
                    "`localhost:<port>`:\n" + "\n".join(lines))]
