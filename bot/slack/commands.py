"""`/cluster …`: parse, ack at once, then call one service and render its answer."""

from __future__ import annotations

from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncRespond

from bot.domain.commands import (
    HelpCommand,
    ListCommand,
    QuoteCommand,
    StatusCommand,
    TerminateCommand,
)
from bot.domain.errors import InvalidCommand
from bot.domain.models import Actor
from bot.services.container import Services
from bot.slack import parsing
from bot.slack.blocks import cluster as cluster_blocks
from bot.slack.blocks import common
from bot.slack.blocks import quote as quote_blocks
from bot.slack.blocks.message import Message
from bot.slack.errors import answering

EPHEMERAL: dict[str, Any] = {"response_type": "ephemeral"}


def register(app: AsyncApp, services: Services) -> None:
    @app.command("/cluster")
    @answering
    async def cluster_command(ack: AsyncAck, command: dict[str, Any],
                              respond: AsyncRespond) -> None:
        try:
            cmd = parsing.parse(command.get("text") or "")
        except InvalidCommand as exc:
            await ack(**common.error_message(exc.user_message, usage=exc.usage).as_kwargs(),
                      **EPHEMERAL)
            return
        if isinstance(cmd, HelpCommand):
            await ack(**common.help_message(unknown=cmd.unknown).as_kwargs(), **EPHEMERAL)
            return
        actor = Actor(user_id=command["user_id"], team_id=command.get("team_id"))
        now = services.clock.now
        reply: Message
        if isinstance(cmd, QuoteCommand):
            await ack(text=f"Pricing {cmd.nodes} × {cmd.accelerator}x{cmd.gpus_per_node} "
                           "at AI Reserve…", **EPHEMERAL)
            quote = await services.quoting.quote(cmd, actor=actor,
                                                 channel_id=command["channel_id"])
            reply = quote_blocks.quote_card(quote, now=now())
        elif isinstance(cmd, ListCommand):
            await ack()
            reply = cluster_blocks.cluster_list(await services.clusters.live(), now=now())
        elif isinstance(cmd, StatusCommand):
            await ack(text=f"Looking up `{cmd.cluster_id}`…", **EPHEMERAL)
            record, nodes = await services.clusters.status(cmd.cluster_id)
            reply = cluster_blocks.cluster_status(record, now=now(), nodes=nodes)
        else:
            assert isinstance(cmd, TerminateCommand)
            await ack()
            record = await services.termination.check(cluster_id=cmd.cluster_id, actor=actor)
            reply = cluster_blocks.terminate_prompt(record)
        await respond(**reply.as_kwargs(), **EPHEMERAL)
