"""Button clicks: ack at once, unpack the typed reference, call one service, answer privately."""

from __future__ import annotations

from typing import Any, TypeVar

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncRespond
from slack_sdk.web.async_client import AsyncWebClient

from bot.domain.models import Actor, Decision, RequestStatus
from bot.domain.workload import default_workload
from bot.services.container import Services
from bot.slack.blocks import common
from bot.slack.blocks import launch_modal as modal_blocks
from bot.slack.errors import StaleReference, answering
from bot.slack.ids import (
    Action,
    ApprovalRef,
    ClusterRef,
    QuoteRef,
    Ref,
    RequestRef,
    VolumeRef,
)

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


async def _say(respond: AsyncRespond, text: str) -> None:
    """A private one-line answer to the person who clicked."""
    await respond(**common.notice(text).as_kwargs(), **EPHEMERAL)


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
        decide = (services.approvals.approve if decision is Decision.APPROVE
                  else services.approvals.reject)
        request = await decide(request_id=ref.request_id, quote_id=ref.quote_id,
                               hourly_cents=ref.hourly_cents, actor=_actor(body))
        verb = "Approved" if decision is Decision.APPROVE else "Rejected"
        waiting = request.status is RequestStatus.PENDING
        await _say(respond, "Approved; it needs one more approver." if waiting
                   else f"{verb}. The card shows the outcome.")

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
        await _say(respond, "Trying the launch again.")

    @app.action(Action.TERMINATE)
    @answering
    async def terminate(ack: AsyncAck, body: dict[str, Any], action: dict[str, Any],
                        respond: AsyncRespond) -> None:
        await ack()
        ref = _ref(ClusterRef, action)
        record = await services.termination.terminate(cluster_id=ref.cluster_id,
                                                      actor=_actor(body))
        await _say(respond, f"Terminating `{record.id}`. Its message will show the "
                                      "final cost.")

    @app.action(Action.RECOVER)
    @answering
    async def recover(ack: AsyncAck, body: dict[str, Any], action: dict[str, Any],
                      respond: AsyncRespond) -> None:
        await ack()
        ref = _ref(ClusterRef, action)
        await services.recovery.recover(cluster_id=ref.cluster_id, actor=_actor(body))
        await _say(respond, f"Recovery attempt started on `{ref.cluster_id}`."
                                      )

    @app.action(Action.AUTORECOVER_ON)
    @answering
    async def autorecover_on(ack: AsyncAck, body: dict[str, Any], action: dict[str, Any],
                             respond: AsyncRespond) -> None:
        await ack()
        ref = _ref(ClusterRef, action)
        await services.recovery.set_auto(cluster_id=ref.cluster_id, actor=_actor(body), on=True)
        await _say(respond, f"Automatic recovery is on for `{ref.cluster_id}`: AI "
                                      "Reserve tries on its next health pass.")

    @app.action(Action.KEEP_RUNNING)
    @answering
    async def keep_running(ack: AsyncAck, body: dict[str, Any], action: dict[str, Any],
                           respond: AsyncRespond) -> None:
        await ack()
        ref = _ref(ClusterRef, action)
        record = await services.stewardship.keep_running(cluster_id=ref.cluster_id,
                                                         actor=_actor(body))
        await _say(respond, f"Noted: `{record.id}` keeps running. The hourly "
                                      "reminders go on until it is terminated.")

    @app.action(Action.CLAIM)
    @answering
    async def claim(ack: AsyncAck, body: dict[str, Any], action: dict[str, Any],
                    respond: AsyncRespond) -> None:
        await ack()
        ref = _ref(ClusterRef, action)
        await services.stewardship.claim(cluster_id=ref.cluster_id, actor=_actor(body))
        await _say(respond, f"`{ref.cluster_id}` is yours now: its reminders and "
                                      "notices come to you.")

    @app.action(Action.DELETE_VOLUME)
    @answering
    async def delete_volume(ack: AsyncAck, body: dict[str, Any], action: dict[str, Any],
                            respond: AsyncRespond) -> None:
        await ack()
        ref = _ref(VolumeRef, action)
        await services.volumes.delete(volume_id=ref.volume_id, actor=_actor(body))
        await _say(respond, f"Deleting volume `{ref.volume_id}`; its billing stops "
                                      "now.")

    @app.action(Action.KEEP_VOLUME)
    @answering
    async def keep_volume(ack: AsyncAck, body: dict[str, Any], action: dict[str, Any],
                          respond: AsyncRespond) -> None:
        await ack()
        ref = _ref(VolumeRef, action)
        await services.volumes.keep(volume_id=ref.volume_id, actor=_actor(body))
        await _say(respond, f"Keeping `{ref.volume_id}`; I'll remind you again in a "
                                      "week.")

    @app.action(Action.EXTEND)
    @answering
    async def extend(ack: AsyncAck, body: dict[str, Any], action: dict[str, Any],
                     respond: AsyncRespond) -> None:
        await ack()
        ref = _ref(ClusterRef, action)
        record = await services.envelopes.extend(cluster_id=ref.cluster_id, actor=_actor(body))
        await _say(respond, f"Extended `{record.id}`: it may now run "
                                      f"{record.lifetime_hours} hours in all.")
