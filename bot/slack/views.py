"""Modal submissions: validate (pure) before the ack so errors show next to the field."""

from __future__ import annotations

from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from bot.domain.errors import InvalidCommand
from bot.domain.workload import WorkloadInvalid, parse_workload, secrets_moved
from bot.services.container import Services
from bot.slack.actions import GROW_ONCE, press_once
from bot.slack.blocks import common
from bot.slack.blocks import launch_modal as modal_blocks
from bot.slack.blocks import story as story_blocks
from bot.slack.blocks import volumes as volume_blocks
from bot.slack.blocks.format import money
from bot.slack.errors import StaleReference, answering, reply_privately
from bot.slack.ids import ApprovalRef, GrowRef, QuoteRef, View
from bot.slack.origin import actor_of

# Modal block ids → the workload's field names.
FIELDS = {
    modal_blocks.FIELD_NAME: "name",
    modal_blocks.FIELD_IMAGE: "image",
    modal_blocks.FIELD_CMD: "cmd",
    modal_blocks.FIELD_ENV: "env",
    modal_blocks.FIELD_PORTS: "ports",
    modal_blocks.FIELD_SSH_KEYS: "ssh_keys",
    modal_blocks.FIELD_AUTO_RECOVERY: "auto_recovery",
    modal_blocks.FIELD_READINESS: "readiness",
    modal_blocks.FIELD_READINESS_LIMIT: "readiness_limit",
    modal_blocks.FIELD_READINESS_ALL: "readiness_all",
    modal_blocks.FIELD_IDLE_MINUTES: "idle_minutes",
    modal_blocks.FIELD_IDLE_ALL: "idle_all",
    modal_blocks.FIELD_IDLE_DONE: "idle_done",
}
BLOCKS = {field: block for block, field in FIELDS.items()}


def register(app: AsyncApp, services: Services) -> None:
    @app.view(View.GROW_VOLUME)
    @answering
    async def submit_grow(ack: AsyncAck, body: dict[str, Any], view: dict[str, Any],
                          client: AsyncWebClient) -> None:
        try:
            ref = GrowRef.unpack(view.get("private_metadata"))
        except ValueError as exc:
            await ack()
            raise StaleReference(str(exc)) from exc
        size = volume_blocks.read_size(view.get("state", {}).get("values", {}),
                                       current_gb=ref.size_gb)
        if isinstance(size, str):
            await ack(response_action="errors", errors={volume_blocks.FIELD_SIZE: size})
            return
        await ack()
        actor = actor_of(body)
        volume = await press_once(
            GROW_ONCE, services, ref, actor,
            lambda: services.volumes.grow(volume_id=ref.volume_id, size_gb=size, actor=actor))
        await reply_privately(common.notice(
            f"Volume `{volume.id}` is {volume.size_gb:,} GB now; it bills "
            f"{money(volume.monthly_cents)}/month from here on."),
            body=body, respond=None, client=client)

    @app.view(View.LAUNCH_REQUEST)
    @answering
    async def submit_launch_request(ack: AsyncAck, body: dict[str, Any],
                                    view: dict[str, Any], client: AsyncWebClient) -> None:
        raw = modal_blocks.read_modal(view.get("state", {}).get("values", {}))
        fields = {FIELDS[k]: v for k, v in raw.items() if k in FIELDS}
        try:
            workload = parse_workload(fields)
        except WorkloadInvalid as exc:
            await ack(response_action="errors",
                      errors={BLOCKS[field]: message for field, message in exc.errors.items()})
            return
        if not workload.ssh_keys and not raw.get(modal_blocks.FIELD_NO_SSH_OK):
            await ack(response_action="errors",
                      errors={modal_blocks.FIELD_NO_SSH_OK: modal_blocks.NO_SSH_ERROR})
            return
        wait_hours = None
        if modal_blocks.FIELD_WAIT_HOURS in raw:
            try:
                wait_hours = services.stock_service().check_hours(
                    str(raw[modal_blocks.FIELD_WAIT_HOURS]))
            except InvalidCommand as exc:
                await ack(response_action="errors",
                          errors={modal_blocks.FIELD_WAIT_HOURS: exc.user_message})
                return
        await ack()
        try:
            ref = QuoteRef.unpack(view.get("private_metadata"))
        except ValueError as exc:
            raise StaleReference(str(exc)) from exc
        request = await services.approvals.submit(quote_id=ref.quote_id, workload=workload,
                                                  wait_hours=wait_hours, actor=actor_of(body))
        if moved := secrets_moved(fields):
            names = ", ".join(f"`{name}`" for name in moved)
            await reply_privately(common.notice(
                f"I moved {names} from the start command of `{request.id}` into its "
                "environment, where values are sealed: the command is shown and stored as "
                "typed, the environment's values never are. The command still sees "
                f"{'it' if len(moved) == 1 else 'them'} as environment variables."),
                body=body, respond=None, client=client)

    @app.view(View.REJECT_REASON)
    @answering
    async def submit_reject_reason(ack: AsyncAck, body: dict[str, Any],
                                   view: dict[str, Any]) -> None:
        values = view.get("state", {}).get("values", {})
        field = (values.get(story_blocks.FIELD_REASON) or {}).get(story_blocks.FIELD_REASON) or {}
        reason = field.get("value") if isinstance(field, dict) else None
        await ack()
        try:
            ref = ApprovalRef.unpack(view.get("private_metadata"))
        except ValueError as exc:
            raise StaleReference(str(exc)) from exc
        await services.approvals.reject(
            request_id=ref.request_id, quote_id=ref.quote_id, hourly_cents=ref.hourly_cents,
            reason=reason if isinstance(reason, str) else None, actor=actor_of(body))
