"""The one place that decides whether a request is the installation's, for every kind of request.

A Bolt global middleware, so it stands in front of every listener there is or will be — slash
commands, buttons (messages and the App Home), view submissions and closes, shortcuts, events —
over HTTP and Socket Mode alike. It runs after `request_context` (its log line has the request
id) and before the repeat filter (bot/slack/once.py: a refused request records no delivery).

A request whose payload names another workspace or organization (bot/slack/origin.py), or none,
or that arrives before the bot knows where it is installed (bot/domain/installation.py), never
reaches a listener: no service is called, nothing changes at AI Reserve or in the database but
one audit row (`action=workspace`, `outcome=refused`). The person is told why where Slack lets
us answer — a command in its ack, a view submission by turning the modal into the answer, a
button or shortcut privately (ephemeral through its response_url, else in the App Home's
Messages tab) — and one WARNING line names the workspace.

Judged from memory: where the app is installed was read at start (`People.read_installation`),
or, installed through OAuth, is the installation Bolt's `authorize` found for the request in
the database (bot/slack/tenancy.py) — "this installation", the same rule for every kind of
request and an org-wide install's every workspace — so no call to Slack stands between a
request and its ack; the reply and the audit row are written
after the ack, counted in flight like a listener's work (shutdown and tests wait for them).
A request let in is served under its workspace's spend policy (`People.serving`: the policy
file's `installations:`, bot/domain/places.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_sdk.web.async_client import AsyncWebClient

from bot.domain.installation import Installation, outsider, readable
from bot.domain.models import Actor
from bot.services.audit import AuditLog
from bot.services.people import People
from bot.slack.acks_first import after_ack
from bot.slack.blocks.common import notice, notice_modal
from bot.slack.errors import reply_privately
from bot.slack.inflight import ACK_SENT, InFlight
from bot.slack.once import Middleware
from bot.slack.origin import actor_of, kind_of, origin_of, what_of
from bot.slack.tenancy import INSTALLATION

log = logging.getLogger(__name__)

ACTION = "workspace"  # the audit trail's action for a refused request
ID_MAX = 40  # characters of a payload's user or team id stored with the refusal
_ANSWERED_LATER = frozenset({"block_actions", "shortcut", "message_action"})


def _ack(kind: str, refusal: str) -> BoltResponse:
    """The answer Slack gets at once: the refusal itself where an ack can carry it."""
    if kind == "slash_command":
        return BoltResponse(status=200, body={"response_type": "ephemeral", "text": refusal})
    if kind == "view_submission":
        view = notice_modal("Not taken", refusal).to_dict()
        return BoltResponse(status=200, body={"response_action": "update", "view": view})
    if kind == "block_suggestion":
        return BoltResponse(status=200, body={"options": []})
    return BoltResponse(status=200, body="")


def only_installation(people: People, audit: AuditLog, inflight: InFlight,
                      client: AsyncWebClient) -> Middleware:
    after: set[asyncio.Task[None]] = set()

    async def refused(req: AsyncBoltRequest, kind: str, refusal: str) -> None:
        """After the ack: the private answer where one is left to give, and the audit row."""
        try:
            sent = req.context.get(ACK_SENT)
            if isinstance(sent, asyncio.Event):
                await sent.wait()
            after_ack()
            body = req.body
            if kind in _ANSWERED_LATER:
                try:
                    await reply_privately(notice(refusal), body=body,
                                          respond=req.context.respond, client=client)
                except Exception as exc:  # the audit row below still says what happened
                    log.warning("could not tell an outsider why: %s", type(exc).__name__)
            actor = actor_of(body)
            await audit.write(actor=Actor(user_id=readable(actor.user_id, ID_MAX),
                                          team_id=readable(actor.team_id or "", ID_MAX) or None),
                              action=ACTION, subject_id=what_of(body), outcome="refused",
                              detail=f"{refusal} (names {origin_of(body).named()})")
        except Exception:
            log.exception("could not record a refused request in the audit trail")
        finally:
            inflight.finished()

    async def gate(req: AsyncBoltRequest, resp: BoltResponse,
                   next: Callable[[], Awaitable[None]]) -> BoltResponse | None:
        origin = origin_of(req.body)
        serving = req.context.get(INSTALLATION)  # OAuth: the one serving it (tenancy.py)
        installed = serving.installed if isinstance(serving, Installation) \
            else people.installation
        refusal = outsider(installed, origin)
        if refusal is None:
            people.serving(actor_of(req.body))  # whose policy applies to what it asks
            await next()
            return None
        kind = kind_of(req.body)
        home = installed.known_as if installed else None
        log.warning("refused a %s (%s) by %s naming workspace %s: the bot is installed in %s",
                    kind, what_of(req.body), readable(actor_of(req.body).user_id, ID_MAX),
                    origin.named(), home or "a workspace not known yet")
        inflight.started()
        task = asyncio.create_task(refused(req, kind, refusal))
        after.add(task)
        task.add_done_callback(after.discard)
        return _ack(kind, refusal)

    return gate
