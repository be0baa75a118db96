"""Button clicks: ack at once, unpack the typed reference, call one service, answer privately."""

from __future__ import annotations

from typing import Any, TypeVar

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncRespond
from slack_sdk.web.async_client import AsyncWebClient

from bot.domain.models import Actor, Decision
from bot.domain.workload import default_workload
from bot.services.container import Services
from bot.slack.blocks import common
from bot.slack.blocks import launch_modal as modal_blocks
from bot.slack.errors import StaleReference, answering
from bot.slack.ids import Action, ApprovalRef, ClusterRef, QuoteRef, Ref, RequestRef

R = TypeVar("R", bound=Ref)
EPHEMERAL: dict[str, Any] = {"response_type": "ephemeral", "replace_original": False}


def _actor(body: dict[str, Any]) -> Actor:
    user = body["user"]
    return Actor(user_id=user["id"], team_id=user.get("team_id") or
                 (body.get("team") or {}).get("id"))


def _ref(kind: type[R], action: dict[str, Any]) -> R:
    try:
        return kind.unpack(action.get("value"))
    except ValueError as exc:
        raise StaleReference(str(exc)) from exc


def register(app: AsyncApp, services: Services) -> None:
    @app.action(Action.QUOTE_REQUEST_LAUNCH)
    @answering
    async def request_launch(ack: AsyncAck, body: dict[str, Any], action: dict[str, Any],
                             client: AsyncWebClient) -> None:
        await ack()
        ref = _ref(QuoteRef, action)
        # A local read only: the trigger_id is valid for 3 s and single-use.
        quote = await services.approvals.quote_for_request(quote_id=ref.quote_id,
                                                           actor=_actor(body))
        view = modal_blocks.launch_modal(quote, defaults=default_workload())
        await client.views_open(trigger_id=body["trigger_id"], view=view)

    @app.action(Action.QUOTE_DISCARD)
    @answering
    async def discard(ack: AsyncAck, respond: AsyncRespond) -> None:
        await ack()
        await respond(delete_original=True)

    async def decide(body: dict[str, Any], action: dict[str, Any], decision: Decision,
                     respond: AsyncRespond) -> None:
        ref = _ref(ApprovalRef, action)
        await services.approvals.decide(request_id=ref.request_id, quote_id=ref.quote_id,
                                        hourly_cents=ref.hourly_cents, decision=decision,
                                        actor=_actor(body))
        verb = "Approved" if decision is Decision.APPROVE else "Rejected"
        await respond(**common.notice(f"{verb}. The card shows the outcome.").as_kwargs(),
                      **EPHEMERAL)

    @app.action(Action.APPROVE)
    @answering
    async def approve(ack: AsyncAck, body: dict[str, Any], action: dict[str, Any],
                      respond: AsyncRespond) -> None:
        await ack()
        await decide(body, action, Decision.APPROVE, respond)

    @app.action(Action.REJECT)
    @answering
    async def reject(ack: AsyncAck, body: dict[str, Any], action: dict[str, Any],
                     respond: AsyncRespond) -> None:
        await ack()
        await decide(body, action, Decision.REJECT, respond)

    @app.action(Action.RETRY_LAUNCH)
    @answering
    async def retry(ack: AsyncAck, body: dict[str, Any], action: dict[str, Any],
                    respond: AsyncRespond) -> None:
        await ack()
        ref = _ref(RequestRef, action)
        await services.approvals.retry(request_id=ref.request_id, actor=_actor(body))
        await respond(**common.notice("Trying the launch again.").as_kwargs(), **EPHEMERAL)

    @app.action(Action.TERMINATE)
    @answering
    async def terminate(ack: AsyncAck, body: dict[str, Any], action: dict[str, Any],
                        respond: AsyncRespond) -> None:
        await ack()
        ref = _ref(ClusterRef, action)
        record = await services.termination.terminate(cluster_id=ref.cluster_id,
                                                      actor=_actor(body))
        await respond(**common.notice(f"Terminating `{record.id}`. Its message will show the "
                                      "final cost.").as_kwargs(), **EPHEMERAL)
