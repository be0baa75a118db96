"""Button presses: one table says, per button, what its value carries, which service it calls
and what the presser is told; one listener serves every row.

Each listener acks at once, unpacks the typed reference (the version of what the button acts
on, as it was shown), and calls the service. A row with a `Once` goes through
`ButtonClaims.once`: the first press of (action, subject, version) acts, every repeat or stale
copy — a double click, a proxy retry, another person's DM, the App Home — is told what already
happened and by whom. Approve/Reject need no claim: the approval service's compare-and-set on
the request (its quote and rate) is already once per approver. Answers are private: ephemeral
through the response_url, or a DM where Slack gives none (the App Home), whose view is then
published again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncRespond
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from bot.domain.claims import ClaimKey
from bot.domain.errors import Conflict
from bot.domain.extension import Extension, ExtensionStatus
from bot.domain.hours import HourState
from bot.domain.models import (
    Actor,
    ClusterRecord,
    LaunchRequest,
    QuoteInfo,
    QuoteOutlook,
    RequestStatus,
    VolumeRecord,
)
from bot.domain.workload import default_workload
from bot.services.container import Services
from bot.services.extensions import ExtendOutcome
from bot.slack import home, uploads
from bot.slack.blocks import cluster as cluster_blocks
from bot.slack.blocks import common
from bot.slack.blocks import extension as extension_blocks
from bot.slack.blocks import launch_modal as modal_blocks
from bot.slack.blocks import quote as quote_blocks
from bot.slack.blocks import recovery as recovery_blocks
from bot.slack.blocks import stock as stock_blocks
from bot.slack.blocks import story as story_blocks
from bot.slack.blocks import volumes as volume_blocks
from bot.slack.blocks.format import money
from bot.slack.blocks.message import Message
from bot.slack.buttons import Button, Once, R, T
from bot.slack.duty_buttons import DUTY_BUTTONS
from bot.slack.errors import StaleReference, answering, reply_privately
from bot.slack.ids import (
    Action,
    AlternativeRef,
    ApprovalRef,
    ClusterRef,
    EnvelopeRef,
    ExtensionRef,
    GrowRef,
    HoursRef,
    IdleRef,
    QuoteRef,
    ReadinessRef,
    RecoveryRef,
    RelaunchRef,
    ReminderRef,
    RequestRef,
    VolumeRef,
    WaitRef,
    WithdrawRef,
)
from bot.slack.origin import actor_of

Quoted = tuple[QuoteInfo, QuoteOutlook]
Hours = tuple[ClusterRecord, list[tuple[datetime, HourState]]]


async def _relaunch(s: Services, r: RelaunchRef, a: Actor) -> Quoted:
    """The same shape quoted on the volume the cluster kept, in the cluster's channel."""
    cmd, channel_id = await s.volumes.relaunch(cluster_id=r.cluster_id)
    quote = await s.quoting.quote(cmd, actor=a, channel_id=channel_id)
    return quote, await s.quoting.outlook(quote)


async def _extend(s: Services, r: EnvelopeRef, a: Actor) -> ExtendOutcome:
    """Extend, as confirmed: the hours the button carries (an older button: the policy's
    lifetime, else the envelope once more), on the envelope it showed."""
    hours = r.add or s.people.policy.max_lifetime_hours or r.hours
    return await s.extensions.ask(cluster_id=r.cluster_id, actor=a, hours=max(1, hours),
                                  shown_hours=r.hours)


def _extended_by(r: EnvelopeRef, o: ExtendOutcome, by: str) -> str:
    if o.extension is None:
        return (f"Already extended by {by} to {o.cluster.lifetime_hours} h (this button "
                f"showed {r.hours} h); nothing more was extended.")
    return (f"Already asked by {by}: extending `{o.cluster.id}` to "
            f"{o.judgement.to_hours} h waits for approvers (`{o.extension.id}` in the "
            "approvals channel); nothing more was asked.")


def _decided(verb: str) -> Callable[[ApprovalRef, LaunchRequest], str]:
    def said(_: ApprovalRef, request: LaunchRequest) -> str:
        if request.status is RequestStatus.PENDING:
            return "Approved; it needs one more approver."
        if request.status is RequestStatus.WITHDRAWN:  # the requester's own Reject
            return story_blocks.withdrawn_words(request.id)
        return f"{verb}. The card shows the outcome."
    return said


BUTTONS: dict[str, Button[Any, Any]] = {
    Action.APPROVE: Button[ApprovalRef, LaunchRequest](
        ApprovalRef,
        lambda s, r, a: s.approvals.approve(request_id=r.request_id, quote_id=r.quote_id,
                                            hourly_cents=r.hourly_cents, actor=a),
        _decided("Approved")),
    Action.REJECT: Button[ApprovalRef, LaunchRequest](
        ApprovalRef,
        lambda s, r, a: s.approvals.reject(request_id=r.request_id, quote_id=r.quote_id,
                                           hourly_cents=r.hourly_cents, actor=a),
        _decided("Rejected")),
    Action.WITHDRAW: Button[WithdrawRef, LaunchRequest](
        WithdrawRef,
        lambda s, r, a: s.approvals.withdraw(request_id=r.request_id, actor=a),
        lambda r, request: story_blocks.withdrawn_words(request.id)),
    Action.RETRY_LAUNCH: Button[RequestRef, LaunchRequest](
        RequestRef,
        lambda s, r, a: s.approvals.retry(request_id=r.request_id, attempt=r.attempt, actor=a),
        lambda r, _: "Trying the launch again.",
        Once("retry", lambda r: (r.request_id, r.attempt),
             lambda r, _, by: f"Already retried by {by}; the card shows how the launch goes.")),
    Action.WAIT_FOR_STOCK: Button[WaitRef, LaunchRequest](
        WaitRef,
        lambda s, r, a: s.stock_service().wait(request_id=r.request_id, actor=a,
                                               hours=s.stock_service().max_hours()),
        lambda r, q: stock_blocks.waiting_said(q)),
    Action.TERMINATE: Button[ClusterRef, ClusterRecord](
        ClusterRef,
        lambda s, r, a: s.termination.terminate(cluster_id=r.cluster_id, actor=a),
        lambda r, c: f"Terminating `{c.id}`. Its message will show the final cost.",
        Once("terminate", lambda r: (r.cluster_id, "-"),
             lambda r, c, by: f"Already terminated by {by}: `{c.id}` was {c.status.value} "
                              "then; its message shows the final cost.")),
    Action.RECOVER: Button[RecoveryRef, ClusterRecord](
        RecoveryRef,
        lambda s, r, a: s.recovery.recover(cluster_id=r.cluster_id, actor=a,
                                           shown=(r.episode, r.attempts_used)),
        lambda r, c: f"Recovery attempt started on `{c.id}`.",
        Once("recover", lambda r: (r.cluster_id, f"{r.episode}.{r.attempts_used}"),
             lambda r, c, by: f"Already asked by {by}: recovery attempt {r.attempts_used + 1} "
                              f"on `{c.id}` started then; its progress is in the cluster's "
                              f"thread. To try once more: `/cluster recover {c.id}`."),
        check=lambda s, r, a: s.recovery.check(cluster_id=r.cluster_id, actor=a)),
    Action.AUTORECOVER_ON: Button[RecoveryRef, ClusterRecord](
        RecoveryRef,
        lambda s, r, a: s.recovery.set_auto(cluster_id=r.cluster_id, actor=a, on=True),
        lambda r, c: recovery_blocks.auto_recovery_said(c, on=True),
        Once("autorecover", lambda r: (r.cluster_id, f"{r.episode}.{r.attempts_used}"),
             lambda r, c, by: f"Already turned on by {by}: automatic recovery is on for "
                              f"`{c.id}`."),
        check=lambda s, r, a: s.recovery.check(cluster_id=r.cluster_id, actor=a, auto=True)),
    Action.KEEP_RUNNING: Button[ReminderRef, ClusterRecord](
        ReminderRef,
        lambda s, r, a: s.stewardship.keep_running(cluster_id=r.cluster_id, actor=a),
        lambda r, c: f"Noted: `{c.id}` keeps running. The hourly reminders go on until it is "
                     "terminated.",
        Once("keep_running", lambda r: (r.cluster_id, str(r.hour)),
             lambda r, c, by: f"Already noted by {by}: `{c.id}` was kept running then; the "
                              "hourly reminders go on while it runs.")),
    Action.CLAIM: Button[ClusterRef, ClusterRecord](
        ClusterRef,
        lambda s, r, a: s.stewardship.claim(cluster_id=r.cluster_id, actor=a),
        lambda r, c: f"`{c.id}` is yours now: its reminders and notices come to you.",
        Once("claim", lambda r: (r.cluster_id, "-"),
             lambda r, c, by: f"Already claimed by {by}: `{c.id}` is theirs.")),
    Action.DELETE_VOLUME: Button[VolumeRef, VolumeRecord](
        VolumeRef,
        lambda s, r, a: s.volumes.delete(volume_id=r.volume_id, actor=a),
        lambda r, v: f"Deleting volume `{v.id}`; its billing stops now.",
        Once("delete_volume", lambda r: (r.volume_id, "-"),
             lambda r, v, by: f"Already deleted by {by}: volume `{v.id}` no longer bills.")),
    Action.KEEP_VOLUME: Button[VolumeRef, VolumeRecord](
        VolumeRef,
        lambda s, r, a: s.volumes.keep(volume_id=r.volume_id, actor=a),
        lambda r, v: f"Keeping `{v.id}`; I'll remind you again in a week.",
        Once("keep_volume", lambda r: (r.volume_id, str(r.reminder)),
             lambda r, v, by: f"Already kept by {by}: `{v.id}` is reminded again in a week.")),
    Action.EXTEND: Button[EnvelopeRef, ExtendOutcome](
        EnvelopeRef, _extend,
        lambda r, o: extension_blocks.asked(o.cluster, o.judgement, o.extension),
        Once("extend", lambda r: (r.cluster_id, f"{r.hours}+{r.add}" if r.add else str(r.hours)),
             lambda r, o, by: _extended_by(r, o, by))),
    Action.EXTENSION_APPROVE: Button[ExtensionRef, Extension](
        ExtensionRef,
        lambda s, r, a: s.extensions.approve(extension_id=r.extension_id, hours=r.hours,
                                             from_hours=r.from_hours, actor=a),
        lambda r, x: (f"Approved; it needs {x.approvals_needed - len(x.approved_by)} more."
                      if x.status is ExtensionStatus.PENDING else
                      f"Approved: `{x.cluster_id}` may now run {x.to_hours} hours in all.")),
    Action.EXTENSION_REJECT: Button[ExtensionRef, Extension](
        ExtensionRef,
        lambda s, r, a: s.extensions.reject(extension_id=r.extension_id, hours=r.hours,
                                            from_hours=r.from_hours, actor=a),
        lambda r, x: f"Rejected: `{x.cluster_id}` keeps its {x.from_hours} h envelope."),
    Action.RELAUNCH_ON_VOLUME: Button[RelaunchRef, Quoted](
        RelaunchRef, _relaunch,
        lambda r, q: f"Quoted `{r.cluster_id}`'s shape on volume `{r.volume_id}`.",
        Once("relaunch", lambda r: (r.cluster_id, r.volume_id),
             lambda r, q, by: f"Already quoted by {by}. To price it yourself: `/cluster quote "
                              f"{q[0].spec.shape.accelerator}x{q[0].spec.shape.gpus_per_node} "
                              f"nodes={q[0].spec.shape.nodes} volume={r.volume_id}`."),
        card=lambda s, q: quote_blocks.quote_card(q[0], now=s.clock.now(), outlook=q[1])),
    Action.HOURS_CHART: Button[HoursRef, Hours](
        HoursRef, lambda s, r, a: s.clusters.billed_hours(cluster_id=r.cluster_id),
        lambda r, h: f"The chart of `{r.cluster_id}`'s {h[0].accrued_hours} billed hours is in "
                     "the thread.",
        Once("hours_chart", lambda r: (r.cluster_id, str(r.hours)),
             lambda r, h, by: f"Already drawn for {by}: the chart of `{r.cluster_id}`'s "
                              f"{h[0].accrued_hours} billed hours is in the thread."),
        picture=lambda h: uploads.hours_picture(*h)),
    Action.KEEP_WAITING: Button[ReadinessRef, ClusterRecord](
        ReadinessRef,
        lambda s, r, a: s.readiness_service().keep_waiting(cluster_id=r.cluster_id,
                                                           prompt=r.prompt, actor=a),
        lambda r, c: f"Waiting longer for `{c.id}`'s readiness line: I'll say when it serves, "
                     "or ask again after the same limit. It bills meanwhile.",
        Once("keep_waiting", lambda r: (r.cluster_id, str(r.prompt)),
             lambda r, c, by: f"Already answered by {by}: the wait for `{c.id}` was "
                              "extended then.")),
    Action.KEEP_IDLE: Button[IdleRef, ClusterRecord](
        IdleRef,
        lambda s, r, a: s.readiness_service().idle.keep(cluster_id=r.cluster_id,
                                                        episode=r.episode, hours=r.hours,
                                                        actor=a),
        lambda r, c: f"Keeping `{c.id}` for {r.hours} h: no idle rule fires and nothing "
                     f"terminates it until then. It bills {money(c.hourly_cents)}/h meanwhile.",
        Once("keep_idle", lambda r: (r.cluster_id, str(r.episode)),
             lambda r, c, by: f"Already answered by {by}: `{c.id}` was kept then.")),
    Action.QUOTE_THIS: Button[AlternativeRef, Any](
        AlternativeRef,
        lambda s, r, a: _quote_this(s, r, a),
        lambda r, shown: shown),
    Action.CLUSTER_STATUS: Button[ClusterRef, Message](
        ClusterRef,
        lambda s, r, a: _status(s, r),
        lambda r, shown: shown),
    **DUTY_BUTTONS,
}

GROW_ONCE = Once[GrowRef, VolumeRecord](
    "grow_volume", lambda r: (r.volume_id, str(r.size_gb)),
    lambda r, v, by: f"Already grown by {by}: volume `{v.id}` is {v.size_gb:,} GB now "
                     f"(this form showed {r.size_gb:,} GB).")


async def _quote_this(services: Services, ref: AlternativeRef, actor: Actor) -> Message:
    """A fresh quote card for the alternative (the plan of the card it was on)."""
    quote, outlook = await services.quoting.quote_instead(
        source_quote_id=ref.quote_id,
        accelerator=ref.accelerator, gpus_per_node=ref.gpus_per_node, nodes=ref.nodes,
        location=ref.location, actor=actor)
    return quote_blocks.quote_card(quote, now=services.clock.now(), outlook=outlook)


async def _status(services: Services, ref: ClusterRef) -> Message:
    record, nodes = await services.clusters.status(ref.cluster_id)
    return cluster_blocks.cluster_status(record, now=services.clock.now(), nodes=nodes)


def _ref(kind: type[R], action: dict[str, Any]) -> R:
    try:
        return kind.unpack(action.get("value"))
    except ValueError as exc:
        raise StaleReference(str(exc)) from exc


async def press(row: Button[R, T], services: Services, ref: R, actor: Actor) -> T:
    """Call the row's service, through a claim of (action, subject, version) if it has one."""
    if row.check is not None:
        await row.check(services, ref, actor)
    if row.once is None:
        return await row.act(services, ref, actor)
    return await press_once(row.once, services, ref, actor,
                            lambda: row.act(services, ref, actor))


async def press_once(once: Once[R, T], services: Services, ref: R, actor: Actor,
                     act: Callable[[], Awaitable[T]]) -> T:
    """`act` through a claim of (action, subject, version) — a button's or a form's."""
    subject, version = once.key(ref)
    return await services.claims.once(
        ClaimKey(action=once.action, subject_id=subject, version=version), actor=actor,
        act=act, told=lambda result: once.told(ref, result, f"<@{actor.user_id}>"))


def _listener(row: Button[R, T], services: Services) -> Callable[..., Awaitable[None]]:
    async def pressed(ack: AsyncAck, body: dict[str, Any], action: dict[str, Any],
                      respond: AsyncRespond, client: AsyncWebClient) -> None:
        await ack()
        try:
            ref = _ref(row.ref, action)
            actor = actor_of(body)
            if row.picture is None:
                result = await press(row, services, ref, actor)
            else:  # the upload is part of the claimed act: a refused upload can be retried
                picture = row.picture

                async def act() -> T:
                    done = await row.act(services, ref, actor)
                    await uploads.send_picture(client, picture(done), body=body)
                    return done
                result = await (press_once(row.once, services, ref, actor, act) if row.once
                                else act())
            said = row.said(ref, result)
            answer = (row.card(services, result) if row.card
                      else said if isinstance(said, Message) else common.notice(said))
            await reply_privately(answer, body=body, respond=respond, client=client)
        finally:  # a refusal too: the Home then shows what is true now
            await home.refresh_after_press(services, client, body)
    return pressed


def register(app: AsyncApp, services: Services) -> None:
    for action_id, row in BUTTONS.items():
        listener = _listener(row, services)
        listener.__name__ = listener.__qualname__ = action_id
        app.action(action_id)(answering(listener))

    @app.action(Action.QUOTE_REQUEST_LAUNCH)
    @app.action(Action.QUOTE_WAIT_FOR_STOCK)
    @answering
    async def request_launch(ack: AsyncAck, body: dict[str, Any], action: dict[str, Any],
                             client: AsyncWebClient) -> None:
        await ack()
        ref = _ref(QuoteRef, action)
        # Local reads (cached guest and group checks): the trigger_id is valid for 3 s and
        # single-use. Someone who may not request is refused here, before the form.
        quote = await services.approvals.form_for(quote_id=ref.quote_id, actor=actor_of(body))
        waits = action.get("action_id") == Action.QUOTE_WAIT_FOR_STOCK
        defaults = (await services.templates.launch_defaults(quote)
                    or default_workload(idle=services.people.policy.idle_default()))
        view = modal_blocks.launch_modal(quote, defaults=defaults, wait_max=(
            services.stock_service().max_hours() if waits else None))
        try:
            await client.views_open(trigger_id=body["trigger_id"], view=view)
        except SlackApiError as exc:
            if exc.response.get("error") != "exchanged_trigger_id":
                raise
            # A repeated delivery of one press: its first delivery opened the form.

    @app.action(Action.GROW_VOLUME)
    @answering
    async def grow(ack: AsyncAck, body: dict[str, Any], action: dict[str, Any],
                   respond: AsyncRespond, client: AsyncWebClient) -> None:
        await ack()
        ref = _ref(GrowRef, action)
        # A local read only (the trigger_id lasts 3 s): AI Reserve decides again at submit.
        volume = await services.volumes.growable(volume_id=ref.volume_id, actor=actor_of(body))
        if volume.size_gb != ref.size_gb:
            raise Conflict(f"Volume `{volume.id}` is {volume.size_gb:,} GB now, not the "
                           f"{ref.size_gb:,} GB this list showed: `/cluster volumes` again.")
        await client.views_open(trigger_id=body["trigger_id"],
                                view=volume_blocks.grow_modal(ref))

    @app.action(Action.REJECT_WITH_REASON)
    @answering
    async def reject_with_reason(ack: AsyncAck, body: dict[str, Any], action: dict[str, Any],
                                 client: AsyncWebClient) -> None:
        """Opens the reason form; its submission rejects (bot/slack/views.py)."""
        await ack()
        ref = _ref(ApprovalRef, action)
        try:
            await client.views_open(trigger_id=body["trigger_id"],
                                    view=story_blocks.reject_modal(ref))
        except SlackApiError as exc:
            if exc.response.get("error") != "exchanged_trigger_id":
                raise

    @app.action(Action.QUOTE_DISCARD)
    @answering
    async def discard(ack: AsyncAck, respond: AsyncRespond) -> None:
        await ack()
        await respond(delete_original=True)
