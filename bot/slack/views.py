"""Modal submissions: validate (pure) before the ack so errors show next to the field."""

from __future__ import annotations

from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp

from bot.domain.models import Actor
from bot.domain.workload import WorkloadInvalid, parse_workload
from bot.services.container import Services
from bot.slack.blocks import launch_modal as modal_blocks
from bot.slack.blocks import story as story_blocks
from bot.slack.errors import StaleReference, answering
from bot.slack.ids import ApprovalRef, QuoteRef, View

# Modal block ids → the workload's field names.
FIELDS = {
    modal_blocks.FIELD_NAME: "name",
    modal_blocks.FIELD_IMAGE: "image",
    modal_blocks.FIELD_CMD: "cmd",
    modal_blocks.FIELD_ENV: "env",
    modal_blocks.FIELD_PORTS: "ports",
    modal_blocks.FIELD_SSH_KEYS: "ssh_keys",
    modal_blocks.FIELD_AUTO_RECOVERY: "auto_recovery",
}
BLOCKS = {field: block for block, field in FIELDS.items()}


def register(app: AsyncApp, services: Services) -> None:
    @app.view(View.LAUNCH_REQUEST)
    @answering
    async def submit_launch_request(ack: AsyncAck, body: dict[str, Any],
                                    view: dict[str, Any]) -> None:
        raw = modal_blocks.read_modal(view.get("state", {}).get("values", {}))
        try:
            workload = parse_workload({FIELDS[k]: v for k, v in raw.items() if k in FIELDS})
        except WorkloadInvalid as exc:
            await ack(response_action="errors",
                      errors={BLOCKS[field]: message for field, message in exc.errors.items()})
            return
        if not workload.ssh_keys and not raw.get(modal_blocks.FIELD_NO_SSH_OK):
            await ack(response_action="errors",
                      errors={modal_blocks.FIELD_NO_SSH_OK: modal_blocks.NO_SSH_ERROR})
            return
        await ack()
        try:
            ref = QuoteRef.unpack(view.get("private_metadata"))
        except ValueError as exc:
            raise StaleReference(str(exc)) from exc
        user = body["user"]
        await services.approvals.submit(
            quote_id=ref.quote_id, workload=workload,
            actor=Actor(user_id=user["id"], team_id=user.get("team_id")),
        )

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
        user = body["user"]
        await services.approvals.reject(
            request_id=ref.request_id, quote_id=ref.quote_id, hourly_cents=ref.hourly_cents,
            reason=reason if isinstance(reason, str) else None,
            actor=Actor(user_id=user["id"], team_id=user.get("team_id")))
