"""Issue 24, item 1: a request from another workspace does nothing, whatever its kind.

Signed requests, exactly as Slack sends them, to the bot's real Bolt endpoint — from a client of
another workspace (`T0ELSEWHERE`), acting on live cards, forms and the App Home of ours, with the
ids of our own people (an approver's, for Approve). Each one must change nothing: no AI Reserve
call, no row but its one audit row, no Slack call but the private refusal where Slack lets us
answer (a command's ack, a button's response_url, the Home's Messages tab, the modal itself).
Then the same cards, pressed from home, still work: the refusals were not stale-card refusals.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlencode

import sqlalchemy as sa
from slack_bolt.listener.async_listener_start_handler import AsyncListenerStartHandler
from slack_bolt.middleware.async_custom_middleware import AsyncCustomMiddleware
from slack_bolt.request.async_request import AsyncBoltRequest
from slack_bolt.response import BoltResponse
from slack_bolt.util.utils import get_name_for_callable

from bot.domain.models import RequestStatus
from bot.slack import signals
from bot.slack.ids import Action, View, unpack_any
from devslack.models import Message
from devslack.requests import FORM, LEGACY_TOKEN, Reply, SlackRequests
from devslack.socketrequests import SocketRequests
from storage.tables import metadata
from tests.e2e.harness import ALICE, BOB, SECRET, bot
from tests.e2e.test_extensions import ask, planned, policy
from tests.e2e.test_no_500 import _capture

ELSEWHERE = "T0ELSEWHERE"
REFUSED = "installed in"  # words of the refusal


@dataclass
class World:
    """What a foreign hand may reach for: our live cards, forms and Home."""

    cluster_id: str  # a running cluster of Alice's
    top: Message  # its message (Terminate)
    preview: Message  # `/cluster extend`'s private preview (Extend)
    card: Message  # a pending request's approval card (Approve, Reject)
    pending: str  # that request's id
    adopted: Message  # a cluster found at AI Reserve, nobody's (Claim)
    home: dict[str, Any]  # Bob's App Home (Approve, Reject of the pending request)
    form: dict[str, Any]  # Alice's open launch form (view submission, view close)


async def world(h) -> World:
    cluster_id = await planned(h)
    preview = await ask(h, cluster_id, 1)
    card = await h.request(quote_text="quote h100x8 nodes=3")
    pending = (await h.requests_in_db())[-1].id
    quote = await h.rt.provider.quote_cluster("a100-sxm-80gb", 8, 2)
    found = await h.rt.provider.launch_cluster(quote.id, idempotency_key="outside")
    await h.rt.services.reconciling.reconcile()
    await h.requests.app_home_opened(BOB)
    await h.rt.settle()
    await h.click(await h.quote("quote h100x8 nodes=2"), Action.QUOTE_REQUEST_LAUNCH, user=ALICE)
    form, home = h.slack.last_view(ALICE), h.slack.home(BOB)
    assert form is not None and home is not None
    return World(cluster_id=cluster_id, top=await h.top(cluster_id), preview=preview,
                 card=card, pending=pending, adopted=copy.deepcopy(await h.top(found.id)),
                 home=copy.deepcopy(home), form=copy.deepcopy(form))


async def interactive(client: SlackRequests, body: dict[str, Any]) -> Reply:
    """An interactive payload SlackRequests has no method for, sent as Slack sends it."""
    return await client.send(urlencode({"payload": json.dumps(body)}).encode(),
                             content_type=FORM)


def context(h, client: SlackRequests, user: str) -> dict[str, Any]:
    """The fields every interactive payload carries: who, which workspace, which app."""
    return {"user": {"id": user, "username": user, "name": user, "team_id": client.team_id},
            "team": {"id": client.team_id, "domain": "elsewhere"}, "enterprise": None,
            "api_app_id": h.slack.app_id, "token": LEGACY_TOKEN, "is_enterprise_install": False}


def shortcut(h, w: World, f: SlackRequests) -> Awaitable[Reply]:
    return interactive(f, {**context(h, f, ALICE), "type": "shortcut", "callback_id": "cluster",
                           "trigger_id": h.slack.issue_trigger_id(ALICE), "action_ts": "1.2"})


def form_closed(h, w: World, f: SlackRequests) -> Awaitable[Reply]:
    return interactive(f, {**context(h, f, ALICE), "type": "view_closed", "view": w.form,
                           "is_cleared": False})


def on_home(action_id: str) -> Callable[[Any, World, SlackRequests], Awaitable[Reply]]:
    async def press(h, w: World, f: SlackRequests) -> Reply:
        [block] = [b.block_id for b in h.slack.find_buttons(w.home) if b.action_id == action_id
                   and w.pending in json.dumps(unpack_any(b.value).model_dump())]
        return await f.click(w.home, action_id, user_id=BOB, block_id=block)
    return press


@dataclass
class Case:
    name: str
    user: str  # whose id the foreign payload carries
    act: Callable[[Any, World, SlackRequests], Awaitable[Reply]]
    answer: str  # where the refusal shows: ack | ephemeral | dm | modal | none


CASES = [
    Case("/cluster quote", ALICE,
         lambda h, w, f: f.slash(text="quote h100x8 nodes=4", user_id=ALICE), "ack"),
    Case("/cluster terminate", ALICE,
         lambda h, w, f: f.slash(text=f"terminate {w.cluster_id}", user_id=ALICE), "ack"),
    Case("Approve", BOB, lambda h, w, f: f.click(w.card, Action.APPROVE, user_id=BOB),
         "ephemeral"),
    Case("Reject", BOB, lambda h, w, f: f.click(w.card, Action.REJECT, user_id=BOB),
         "ephemeral"),
    Case("Reject with reason…", BOB,
         lambda h, w, f: f.click(w.card, Action.REJECT_WITH_REASON, user_id=BOB), "ephemeral"),
    Case("Terminate", ALICE, lambda h, w, f: f.click(w.top, Action.TERMINATE, user_id=ALICE),
         "ephemeral"),
    Case("Extend", ALICE, lambda h, w, f: f.click(w.preview, Action.EXTEND, user_id=ALICE),
         "ephemeral"),
    Case("Claim", BOB, lambda h, w, f: f.click(w.adopted, Action.CLAIM, user_id=BOB),
         "ephemeral"),
    Case("Home: Approve", BOB, on_home(Action.APPROVE), "dm"),
    Case("Home: Reject", BOB, on_home(Action.REJECT), "dm"),
    Case("launch form submitted", ALICE,
         lambda h, w, f: f.submit_view(w.form, user_id=ALICE), "modal"),
    Case("launch form closed", ALICE, form_closed, "none"),
    Case("global shortcut", ALICE, shortcut, "dm"),
    Case("event: app_home_opened", BOB, lambda h, w, f: f.app_home_opened(BOB), "none"),
]


async def rows(h) -> dict[str, list[str]]:
    """Every row of every table but the audit trail's."""
    async with h.rt.db.engine.connect() as conn:
        return {t.name: sorted(map(repr, (await conn.execute(sa.select(t))).all()))
                for t in metadata.sorted_tables if t.name != "audit"}


def provider_calls(h) -> float:
    return sum(s.value for m in h.rt.metrics.provider_requests.collect() for s in m.samples
               if s.name.endswith("_total"))


async def audit(h) -> list[Any]:
    async with h.rt.db.transaction() as repos:
        return await repos.audit.list(limit=1000)


def refusal_seen(h, case: Case, reply: Reply) -> bool:
    """The refusal, naming the other workspace, where `case.answer` says it shows."""
    shown = {"ack": [reply.body], "modal": [reply.body],
             "ephemeral": [h.text_of(m) for m in h.slack.ephemerals(case.user)],
             "dm": [h.text_of(m) for m in h.slack.dms(case.user)]}[case.answer]
    return any(REFUSED in text and ELSEWHERE in text for text in shown)


async def no_effect(h, case: Case, act: Callable[[], Awaitable[Reply]]) -> list[str]:
    """What `act` changed beyond one refused audit row and the private refusal."""
    before_rows, before_calls = await rows(h), provider_calls(h)
    before_audit, before_slack = len(await audit(h)), len(h.slack.calls)
    try:
        reply = await act()
    except Exception as exc:  # e.g. an earlier foreign click took the card's buttons away
        return [f"could not even be tried: {exc!r}"]
    await h.rt.settle()
    wrong = []
    if reply.status != 200:
        wrong.append(f"answered {reply}")
    if provider_calls(h) != before_calls:
        wrong.append(f"{provider_calls(h) - before_calls:.0f} AI Reserve call(s)")
    if await rows(h) != before_rows:
        changed = [t for t, r in (await rows(h)).items() if r != before_rows[t]]
        wrong.append(f"rows changed in {changed}")
    trail = await audit(h)
    new = trail[:len(trail) - before_audit]  # newest first
    if [(e.action, e.outcome, e.team_id, e.actor_id) for e in new] != [
            ("workspace", "refused", ELSEWHERE, case.user)]:
        wrong.append(f"audit rows {[(e.action, e.outcome, e.team_id) for e in new]}")
    calls = [c.method for c in h.slack.calls[before_slack:] if not (
        c.method in ("ack", "response_url") or (c.method == "chat.postMessage"
                                                 and c.args.get("channel") == case.user))]
    if calls:
        wrong.append(f"Slack calls {calls}")
    if case.answer != "none" and not refusal_seen(h, case, reply):
        wrong.append(f"no refusal shown ({case.answer})")
    if case.answer == "none" and (reply.body or h.slack.calls[before_slack:]):
        wrong.append(f"an answer where none is due: {reply.body!r}")
    return wrong


async def test_no_request_from_another_workspace_has_any_effect(tmp_path):
    async with bot(tmp_path, policy=policy()) as h:
        w = await world(h)
        async with SlackRequests(events_url=h.requests.events_url, signing_secret=SECRET,
                                 slack=h.slack, team_id=ELSEWHERE) as elsewhere:
            failed = {case.name: wrong for case in CASES if (wrong := await no_effect(
                h, case, lambda case=case: case.act(h, w, elsewhere)))}
        assert failed == {}
        # From home the very same cards still act: the refusals were the workspace's alone.
        await h.click(w.card, Action.APPROVE, user=BOB)
        assert {r.id: r.status for r in await h.requests_in_db()}[w.pending] in (
            RequestStatus.APPROVED, RequestStatus.LAUNCHING, RequestStatus.LAUNCHED)
        await h.click(w.top, Action.TERMINATE, user=ALICE)
        assert (await h.record(w.cluster_id)).status.value in ("terminating", "terminated")


def reshaped(body: bytes, change: Callable[[dict[str, Any]], None]) -> bytes:
    """The same click with its payload changed as `change` says."""
    payload = json.loads(parse_qs(body.decode())["payload"][0])
    change(payload)
    return urlencode({"payload": json.dumps(payload)}).encode()


def _connect_guest(p):  # a shared channel: our team, their person
    p["user"]["team_id"] = ELSEWHERE


def _no_team_object(p):  # org-wide style: `team` null, the workspace only in user.team_id
    p["team"] = None
    p["user"]["team_id"] = ELSEWHERE


def _another_org(p):  # our team id, another Enterprise organization
    p["enterprise"] = {"id": "E0ELSEWHERE", "name": "Elsewhere Inc"}


def _no_workspace(p):  # nothing says where it comes from
    p["team"] = None
    del p["user"]["team_id"]


async def test_every_shape_of_a_foreign_approve_is_refused(tmp_path):
    """A Slack Connect person (our `team.id`, their `user.team_id`), `team` null, another
    Enterprise org, no workspace at all: each a signed Approve by an approver's id."""
    async with bot(tmp_path, policy=policy()) as h:
        card = await h.request(quote_text="quote h100x8 nodes=2")
        pending = (await h.requests_in_db())[-1].id
        for change in (_connect_guest, _no_team_object, _another_org, _no_workspace):
            [sent] = await _capture(h, lambda: h.requests.click(card, Action.APPROVE,
                                                                user_id=BOB))
            expected = "E0ELSEWHERE" if change is _another_org else \
                "doesn't say which workspace" if change is _no_workspace else ELSEWHERE
            before = len(h.slack.ephemerals(BOB))
            reply = await h.requests.send(reshaped(sent, change), content_type=FORM)
            await h.rt.settle()
            said = [h.text_of(m) for m in h.slack.ephemerals(BOB)[before:]]
            assert reply.status == 200 and any(expected in s for s in said), (change, said)
            assert {r.id: r.status for r in await h.requests_in_db()}[pending] \
                is RequestStatus.PENDING, change
            assert h.sim.engine.list_clusters() == [], change
        refused = [e for e in await audit(h) if e.action == "workspace"]
        assert len(refused) == 4 and all(e.outcome == "refused" for e in refused)
        await h.click(card, Action.APPROVE, user=BOB)  # from home, as Slack sends it: acts
        assert len(h.sim.engine.list_clusters()) == 1


def requests_for_every_listener(team: str) -> list[AsyncBoltRequest]:
    """A signed-shaped request of `team` for each button, form, command and event the bot
    knows (bot/slack/ids.py's registries), as Bolt receives it."""
    base = {"user": {"id": BOB, "username": "bob", "team_id": team}, "team": {"id": team},
            "api_app_id": "A0BOT", "token": LEGACY_TOKEN, "trigger_id": "1.2.3"}
    payloads = [{**base, "type": "block_actions", "container": {"type": "message"},
                 "actions": [{"action_id": a, "block_id": "b", "type": "button", "value": "x"}]}
                for a in Action.ALL]
    payloads += [{**base, "type": "view_submission",
                  "view": {"id": "V0", "type": "modal", "callback_id": v, "team_id": team,
                           "private_metadata": "",
                           "state": {"values": {}}}} for v in View.ALL]
    bodies = [urlencode({"payload": json.dumps(p)}) for p in payloads]
    bodies.append(urlencode({"command": "/cluster", "text": "list", "user_id": BOB,
                             "team_id": team, "channel_id": "C0GENERAL",
                             "response_url": "https://hooks.slack.test/x", "trigger_id": "t"}))
    bodies.append(json.dumps({"type": "event_callback", "team_id": team, "event_id": "Ev0",
                              "authorizations": [{"team_id": team, "is_bot": True}],
                              "event": {"type": "app_home_opened", "user": BOB, "tab": "home"}}))
    for n, kind in enumerate(signals.KINDS):  # Slack's word on channels, people and the token
        user = {"id": BOB, "team_id": team, "deleted": True} if kind == "user_change" else BOB
        bodies.append(json.dumps({"type": "event_callback", "team_id": team,
                                  "event_id": f"Ev{n + 1}",
                                  "authorizations": [{"team_id": team, "is_bot": True}],
                                  "event": {"type": kind, "user": user, "channel": "C0GENERAL",
                                            "tokens": {"bot": ["U0BOT"]}}}))
    return [AsyncBoltRequest(body=b, headers={"content-type": ["application/json" if
                                                               b.startswith("{") else FORM]})
            for b in bodies]


async def reached(listener: Any, requests: list[AsyncBoltRequest]) -> bool:
    """Whether any of `requests` matches `listener`. Matching never suspends, so the census of
    every listener against every request would be one step of the loop (~90 ms): this yields
    per listener, so the slow-callback check keeps measuring the bot, not the test's census."""
    await asyncio.sleep(0)
    return any([await listener.async_matches(req=r, resp=BoltResponse(status=200))
                for r in requests])


class Started(AsyncListenerStartHandler):
    def __init__(self, real: AsyncListenerStartHandler) -> None:
        self.real, self.seen = real, []

    async def handle(self, request, response) -> None:
        self.seen.append(request.body)
        await self.real.handle(request=request, response=response)


async def test_one_gate_stands_before_every_listener(tmp_path):
    """Every listener the app registers is reached by one of these requests; from another
    workspace, none of them reaches any listener — one global middleware refuses them all,
    before the repeat filter (a refused request records no delivery)."""
    async with bot(tmp_path) as h:
        app = h.rt.bolt
        listeners = app._async_listeners  # what Bolt will match, in order
        home = requests_for_every_listener(h.slack.team_id)
        unreached = [get_name_for_callable(listener.ack_function) for listener in listeners
                     if not await reached(listener, home)]
        assert unreached == []  # a new listener needs a request here, and the gate covers it
        custom = [m.func.__name__ for m in app._async_middleware_list
                  if isinstance(m, AsyncCustomMiddleware)]
        assert custom == ["request_context", "gate", "drop_repeats"]

        runner = app.listener_runner
        started = runner.listener_start_handler = Started(runner.listener_start_handler)
        before = await rows(h)
        foreign = requests_for_every_listener(ELSEWHERE)
        for request in foreign:
            response = await app.async_dispatch(request)
            assert response.status == 200, request.body
        await h.rt.settle()
        assert started.seen == []
        assert await rows(h) == before and provider_calls(h) == 0
        refused = [e for e in await audit(h) if e.action == "workspace"]
        assert len(refused) == len(foreign) and {e.team_id for e in refused} == {ELSEWHERE}


async def test_over_socket_mode_the_same_gate_refuses(tmp_path):
    """Socket Mode envelopes reach the same Bolt app: a foreign Approve and command do
    nothing there either, and the command's refusal comes back in its ack."""
    async with bot(tmp_path, socket_mode=True) as h:
        card = await h.request(quote_text="quote h100x8 nodes=2")
        elsewhere = SocketRequests(slack=h.slack, team_id=ELSEWHERE)
        for case in (Case("Approve", BOB, lambda h, w, f: f.click(card, Action.APPROVE,
                                                                  user_id=BOB), "ephemeral"),
                     Case("/cluster quote", ALICE, lambda h, w, f: f.slash(
                         text="quote h100x8 nodes=4", user_id=ALICE), "ack")):
            assert await no_effect(h, case, lambda case=case: case.act(h, None, elsewhere)) \
                == [], case.name
        assert h.sim.engine.list_clusters() == []


async def test_until_slack_says_where_the_bot_is_installed_nothing_is_taken(tmp_path):
    """Before auth.test has answered (Slack unreachable at start), a request can't be judged:
    it is refused, from home too, and taken once the installation is known."""
    async with bot(tmp_path) as h:
        people = h.rt.services.people
        people.installation = None  # as when Slack hasn't answered since the start
        before = provider_calls(h)
        reply = await h.slash("quote h100x8 nodes=4")
        assert "can't tell yet which workspace" in reply.body and provider_calls(h) == before
        [refused] = [e for e in await audit(h) if e.action == "workspace"]
        assert (refused.outcome, refused.team_id) == ("refused", h.slack.team_id)
        assert (await people.read_installation()).team_id == h.slack.team_id
        await h.quote("quote h100x8 nodes=4")  # now priced: a card with Request launch
        assert provider_calls(h) > before
