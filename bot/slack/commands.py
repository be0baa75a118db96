"""`/cluster …`: parse, ack at once, then call one service and render its answer."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from functools import cache
from typing import Any

from slack_bolt.async_app import AsyncApp, AsyncRespond
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.domain import audit_csv, commands
from bot.domain.errors import InvalidCommand
from bot.services.container import Services
from bot.slack import parsing, uploads
from bot.slack.blocks import audit as audit_blocks
from bot.slack.blocks import cluster as cluster_blocks
from bot.slack.blocks import common, listing
from bot.slack.blocks import extension as extension_blocks
from bot.slack.blocks import notices as notice_blocks
from bot.slack.blocks import quote as quote_blocks
from bot.slack.blocks import recovery as recovery_blocks
from bot.slack.blocks import spend as spend_blocks
from bot.slack.blocks import stock as stock_blocks
from bot.slack.blocks import story as story_blocks
from bot.slack.blocks import templates as template_blocks
from bot.slack.blocks import volumes as volume_blocks
from bot.slack.blocks.format import money
from bot.slack.blocks.message import Message
from bot.slack.directory import SlackDirectory
from bot.slack.errors import answering
from bot.slack.inflight import AckFirst
from bot.slack.origin import actor_of

EPHEMERAL: dict[str, Any] = {"response_type": "ephemeral"}


def register(app: AsyncApp, services: Services,
             dm_channel: Callable[[str], Awaitable[str]]) -> None:
    @app.command("/cluster")
    @answering
    async def cluster_command(ack: AckFirst, command: dict[str, Any],
                              respond: AsyncRespond, client: AsyncWebClient) -> None:
        try:
            cmd = parsing.parse(command.get("text") or "")
        except InvalidCommand as exc:
            await ack(**common.error_message(exc.user_message, usage=exc.usage).as_kwargs(),
                      **EPHEMERAL)
            return
        if isinstance(cmd, commands.HelpCommand):
            if cmd.unknown:
                await ack(**common.help_message(unknown=cmd.unknown).as_kwargs(), **EPHEMERAL)
            else:
                await ack.answer(help_answer())
            return
        actor = actor_of(command)
        now = services.clock.now
        reply: Message
        if isinstance(cmd, commands.TemplateQuoteCommand | commands.QuoteCommand):
            # read after the ack: Slack waits 3 s
            if isinstance(cmd, commands.TemplateQuoteCommand):
                await ack(text=f"Pricing template `{cmd.template}` at AI Reserve…",
                          **EPHEMERAL)
                template = await services.templates.find(name=cmd.template, actor=actor)
                cmd = parsing.quote_from_template(
                    cmd, template_id=template.id, accelerator=template.accelerator,
                    gpus_per_node=template.gpus_per_node, settings=template.quote_options())
            else:
                await ack(text=f"Pricing {cmd.nodes} × {cmd.accelerator}x{cmd.gpus_per_node} "
                               "at AI Reserve…", **EPHEMERAL)
            quote = await services.quoting.quote(cmd, actor=actor,
                                                 channel_id=command["channel_id"])
            outlook = await services.quoting.outlook(quote)
            reply = quote_blocks.quote_card(quote, now=now(), outlook=outlook)
        elif isinstance(cmd, commands.TemplateSaveCommand):
            await ack()
            saved = await services.templates.save(name=cmd.name, cluster_id=cmd.cluster_id,
                                                  team=cmd.team, actor=actor)
            reply = common.notice(template_blocks.saved_words(saved))
        elif isinstance(cmd, commands.TemplateListCommand):
            await ack()
            reply = template_blocks.template_list(
                await services.templates.visible(actor.user_id), user_id=actor.user_id)
        elif isinstance(cmd, commands.TemplateDeleteCommand):
            await ack()
            gone = await services.templates.delete(name=cmd.name, actor=actor)
            reply = common.notice(f"Template `{gone.name}` is deleted.")
        elif isinstance(cmd, commands.ListCommand):
            await ack()
            live = await services.clusters.live_page(cmd.page)
            reply = listing.cluster_list_with_buttons(
                live.clusters, now=now(), by_state=live.by_state, page=live.page,
                pages=live.pages)
            waits = len(await services.stock_service().waiting())
            if waits:
                reply = stock_blocks.with_list_line(reply, waits)
        elif isinstance(cmd, commands.StatusCommand):
            await ack(text=f"Looking up `{cmd.cluster_id}`…", **EPHEMERAL)
            record, nodes = await services.clusters.status(cmd.cluster_id)
            reply = cluster_blocks.cluster_status(record, now=now(), nodes=nodes)
        elif isinstance(cmd, commands.TerminateCommand):
            await ack()
            record = await services.termination.check(cluster_id=cmd.cluster_id, actor=actor)
            reply = cluster_blocks.terminate_prompt(record, now=now())
        elif isinstance(cmd, commands.RecoverCommand):
            await ack(text=f"Asking AI Reserve to recover `{cmd.cluster_id}`…", **EPHEMERAL)
            await services.recovery.recover(cluster_id=cmd.cluster_id, actor=actor)
            reply = common.notice(f"Recovery attempt started on `{cmd.cluster_id}`; progress "
                                  "is posted in the cluster's thread.")
        elif isinstance(cmd, commands.AutoRecoverCommand):
            await ack()
            record = await services.recovery.set_auto(cluster_id=cmd.cluster_id, actor=actor,
                                                      on=cmd.on)
            reply = common.notice(recovery_blocks.auto_recovery_said(record, on=cmd.on))
        elif isinstance(cmd, commands.NotifyCommand):
            await ack()
            channel_id = cmd.channel_id or await _channel_named(client, cmd.channel_name or "")
            await services.stewardship.notify(cluster_id=cmd.cluster_id,
                                              channel_id=channel_id, actor=actor)
            reply = common.notice(f"<#{channel_id}> will get `{cmd.cluster_id}`'s notices.")
        elif isinstance(cmd, commands.AuditCommand):
            await ack()
            entries = await services.clusters.audit(subject_id=cmd.subject_id, actor=actor)
            reply = audit_blocks.audit_list(entries, subject_id=cmd.subject_id, now=now())
        elif isinstance(cmd, commands.AuditExportCommand):
            await ack(text="Preparing the audit trail as a CSV file…", **EPHEMERAL)
            month, entries = await services.clusters.audit_month(month=cmd.month, actor=actor)
            channel = await dm_channel(actor.user_id)
            await client.files_upload_v2(
                channel=channel, filename=audit_csv.filename(month),
                title=f"Audit trail {month}", content=audit_csv.to_csv(
                    entries, await services.clusters.audit_projects(entries)),
                initial_comment=f"The audit trail of {month}: {len(entries)} entries.")
            reply = common.notice(f"The audit trail of {month} ({len(entries)} entries) is in "
                                  "your DM as a CSV file.")
        elif isinstance(cmd, commands.ExtendCommand):
            await ack()
            # Judged, not done: the answer states the dollars and who decides, with a Confirm.
            record, judged = await services.extensions.preview(cluster_id=cmd.cluster_id,
                                                               actor=actor, hours=cmd.hours)
            reply = extension_blocks.extend_preview(record, judged)
        elif isinstance(cmd, commands.WithdrawCommand):
            await ack()
            request = await services.approvals.withdraw(request_id=cmd.request_id, actor=actor)
            reply = common.notice(story_blocks.withdrawn_words(request.id))
        elif isinstance(cmd, commands.WaitCommand):
            await ack()
            request = await services.stock_service().wait(request_id=cmd.request_id,
                                                          hours=cmd.hours, actor=actor)
            reply = common.notice(stock_blocks.waiting_said(request))
        elif isinstance(cmd, commands.WaitingCommand):
            await ack()
            waiting = await services.stock_service().waiting_with_quotes()
            reply = stock_blocks.waiting_list(waiting, viewer=actor.user_id, now=now())
        elif isinstance(cmd, commands.ConnectCommand):
            await ack(text=f"Reading `{cmd.cluster_id}`'s connection details…", **EPHEMERAL)
            record = await services.stewardship.connect(cluster_id=cmd.cluster_id, actor=actor)
            reply = common.notice(f"Sent `{record.id}`'s connection details to "
                                  f"<@{record.owner_id}> by DM.")
        elif isinstance(cmd, commands.SpendCommand):
            await ack()
            report = await services.clusters.spend(month=cmd.month)
            await respond(**spend_blocks.spend_report(report, now=now(), by=cmd.by).as_kwargs(),
                          **EPHEMERAL)
            try:
                await uploads.send_spend_chart(client, report, user_id=actor.user_id, now=now(),
                                               by=cmd.by)
            except SlackApiError as exc:
                reply = common.notice(f"The spend chart could not be sent "
                                      f"({exc.response.get('error')}); the figures above stand.")
            else:
                return
        elif isinstance(cmd, commands.VolumesCommand):
            await ack(text="Reading the volumes at AI Reserve…", **EPHEMERAL)
            reply = volume_blocks.volume_list(await services.volumes.listing(), now=now())
        elif isinstance(cmd, commands.GrowVolumeCommand):
            await ack(text=f"Growing `{cmd.volume_id}` to {cmd.size_gb:,} GB…", **EPHEMERAL)
            volume = await services.volumes.grow(volume_id=cmd.volume_id, size_gb=cmd.size_gb,
                                                 actor=actor)
            reply = common.notice(f"Volume `{volume.id}` is {volume.size_gb:,} GB now; it "
                                  f"bills {money(volume.monthly_cents)}/month from here on.")
        else:
            assert isinstance(cmd, commands.LogsCommand)
            await ack(text=f"Fetching node {cmd.node}'s log…", **EPHEMERAL)
            logs = await services.stewardship.logs(cluster_id=cmd.cluster_id, node=cmd.node,
                                                   actor=actor)
            reply = notice_blocks.logs_message(
                cmd.cluster_id, cmd.node, [(ln.ts, ln.stream, ln.line) for ln in logs.lines])
        await respond(**reply.as_kwargs(), **EPHEMERAL)


@cache
def help_answer() -> str:
    """`/cluster help`'s ack as JSON, serialised once: the same every time, and ~10 KB."""
    return json.dumps({**common.help_message().as_kwargs(), **EPHEMERAL})


async def _channel_named(client: AsyncWebClient, name: str) -> str:
    """A `#name` Slack did not link, looked up among the public channels; else a clear answer
    naming it (a private channel must be picked from Slack's list, which links it)."""
    try:
        found = await SlackDirectory(client).channel_named(name)
    except SlackApiError as exc:
        if exc.response.get("error") != "missing_scope":
            raise
        found = None  # installed before the app asked for channels:read: say how instead
    if found is None:
        raise InvalidCommand(f"I can't find a public channel `#{name}`; pick the channel from "
                             "Slack's list as you type `#` so it is linked (a private one "
                             "needs me invited first).", bad_part=f"#{name}",
                             usage=commands.USAGE["notify"])
    return found
