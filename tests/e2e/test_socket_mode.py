"""The core flow over Socket Mode for real: `runtime.serve` with an app token, Bolt's own
AsyncSocketModeHandler (slack_sdk's aiohttp SocketModeClient) connected to FakeSlack's WebSocket
through SLACK_API_URL, every request an envelope acked by envelope_id — and Slack asking the bot
to reconnect in the middle of it."""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import aiohttp

from bot.slack.blocks.launch_modal import FIELD_NAME, FIELD_PORTS
from bot.slack.ids import Action
from tests.e2e.harness import (
    ALICE,
    APPROVALS,
    BOB,
    Harness,
    bot,
    launch_without_ssh,
)
from tests.e2e.harness import replicas as replicas_of


def _acked_once_each(h: Harness) -> None:
    socket = h.slack.socket
    acks = Counter(a.envelope_id for a in socket.acks)
    assert {e["envelope_id"]: acks[e["envelope_id"]] for e in socket.envelopes} == {
        e["envelope_id"]: 1 for e in socket.envelopes}
    assert socket.problems == []


def _posted_twice(h: Harness) -> list[str]:
    posted = Counter((c.response.get("channel"), c.args.get("text"))
                     for c in h.slack.calls_to("chat.postMessage") if c.ok)
    return [text for (_, text), n in posted.items() if n > 1]


async def test_quote_request_approve_launch_over_socket_mode_through_reconnects(tmp_path):
    async with bot(tmp_path, socket_mode=True) as h:
        socket = h.slack.socket
        # The handler asked FakeSlack (SLACK_API_URL) for the URL, with the app-level token.
        [opened] = h.slack.calls_to("apps.connections.open")
        assert opened.token == h.slack.app_token and opened.ok
        async with aiohttp.ClientSession() as session, \
                session.get(f"{h.rt.internal_url}/healthz") as health:
            assert health.status == 200  # health on the internal port in Socket Mode too

        # A slash command: its ack carries the ephemeral answer.
        reply = await h.slash("quote h100x8 nodes=4")
        assert reply.status == 200 and not reply.timed_out
        assert socket.envelopes[-1]["type"] == "slash_commands"
        assert socket.envelopes[-1]["accepts_response_payload"] is True
        assert reply.json["response_type"] == "ephemeral"
        assert reply.json["text"].startswith("Pricing 4 × h100x8")
        card = h.last_ephemeral(ALICE, containing=Action.QUOTE_REQUEST_LAUNCH)

        await h.click(card, Action.QUOTE_REQUEST_LAUNCH, user=ALICE)  # views.open
        assert socket.envelopes[-1]["type"] == "interactive"
        assert socket.envelopes[-1]["accepts_response_payload"] is False
        modal = h.slack.last_view(ALICE)
        assert modal is not None

        await socket.disconnect("refresh_requested")  # Slack refreshes the connection
        assert len(h.slack.calls_to("apps.connections.open")) == 2

        reply = await h.submit(modal)  # view_submission: acked with no payload (closes the modal)
        assert reply.status == 200 and reply.body == ""
        assert socket.envelopes[-1]["accepts_response_payload"] is True
        [approval] = h.cards()
        assert approval.channel == APPROVALS

        await socket.disconnect("warning")
        assert len(h.slack.calls_to("apps.connections.open")) == 3

        await h.click(approval, Action.APPROVE, user=BOB)
        await h.advance(60)
        [cluster] = h.sim.engine.list_clusters()
        assert (await h.record(cluster.id)).status.value == "running"
        assert sum("ssh -p" in h.text_of(m) for m in h.slack.dms(ALICE)) == 1
        assert Action.APPROVE not in json.dumps(h.cards()[-1].blocks)

        # Each envelope was acked once, on whichever connection was current; nothing ran twice.
        assert {a.connection for a in socket.acks} == {1, 2, 3}
        _acked_once_each(h)
        assert len(await h.requests_in_db()) == 1
        assert len(h.cards()) == 1
        assert _posted_twice(h) == []
        assert socket.connections_opened == 3 and socket.connected


async def test_an_envelope_in_flight_during_a_refresh_is_answered_once(tmp_path):
    async with bot(tmp_path, socket_mode=True) as h:
        reply, _ = await asyncio.gather(h.slash("quote h100x8 nodes=2"),
                                        h.slack.socket.disconnect("refresh_requested"))
        await h.rt.settle()
        assert reply.status == 200 and reply.json["text"].startswith("Pricing 2 × h100x8")
        assert len(h.slack.ephemerals(ALICE)) == 2  # the ack's text and the quote card
        _acked_once_each(h)


async def test_bad_input_is_answered_in_the_acks_over_socket_mode(tmp_path):
    async with bot(tmp_path, socket_mode=True) as h:
        reply = await h.slash("quote h100x8 nodes=banana")
        assert reply.status == 200 and reply.json["response_type"] == "ephemeral"
        assert "nodes" in json.dumps(reply.json)
        # A modal's bad fields: the view_submission's ack carries response_action errors.
        card = await h.quote()
        await h.click(card, Action.QUOTE_REQUEST_LAUNCH, user=ALICE)
        reply = await h.submit(h.slack.last_view(ALICE), values={
            FIELD_NAME: {FIELD_NAME: "Not A Name!"}, FIELD_PORTS: {FIELD_PORTS: "8000/udp"}})
        assert reply.json["response_action"] == "errors"
        assert set(reply.json["errors"]) == {FIELD_NAME, FIELD_PORTS}
        assert h.cards() == [] and h.slack.calls_to("chat.postMessage") == []
        _acked_once_each(h)


async def test_an_event_redelivered_after_a_reconnect_is_acked_again(tmp_path):
    """Slack redelivers an event nobody acked (retry_attempt 1, same event_id); Bolt sees the
    retry headers it would over HTTP, and the envelope is acked."""
    async with bot(tmp_path, socket_mode=True) as h:
        first = await h.requests.event({"type": "app_home_opened", "user": ALICE, "tab": "home"},
                                       event_id="Ev0REDELIVER")
        await h.slack.socket.disconnect("refresh_requested")
        again = await h.requests.event({"type": "app_home_opened", "user": ALICE, "tab": "home"},
                                       event_id="Ev0REDELIVER", retry_num=1)
        await h.rt.settle()
        assert first.status == again.status == 200
        assert h.slack.socket.envelopes[-1]["retry_attempt"] == 1
        assert h.slack.socket.envelopes[-1]["retry_reason"] == "http_timeout"
        assert h.slack.home(ALICE) is not None
        _acked_once_each(h)


async def test_two_replicas_share_the_envelopes_and_launch_once(tmp_path, database_url):
    """Two bots on one database, each with its own Socket Mode connection; Slack gives each
    envelope to one of them (taking turns), refreshes both connections mid-flow, and still one
    request, one card, one cluster, one SSH DM."""
    async with replicas_of(tmp_path, 2, database_url=database_url,
                           socket_mode=True) as replicas:
        sim, slack, clock = replicas[0].sim, replicas[0].slack, replicas[0].clock
        first = replicas[0]

        async def settle() -> None:
            await asyncio.gather(*(r.rt.settle() for r in replicas))

        await first.requests.slash(text="quote h100x8 nodes=2", user_id=ALICE)
        await settle()
        card = first.last_ephemeral(ALICE, containing=Action.QUOTE_REQUEST_LAUNCH)
        await first.requests.click(card, Action.QUOTE_REQUEST_LAUNCH, user_id=ALICE)
        await settle()
        await slack.socket.disconnect("refresh_requested")  # both replicas reconnect
        await first.requests.submit_view(slack.last_view(ALICE), user_id=ALICE,
                                             values=launch_without_ssh())
        await settle()
        [approval] = first.cards()
        await first.requests.click(approval, Action.APPROVE, user_id=BOB)
        await settle()
        clock.advance(60)
        await asyncio.gather(*(r.rt.services.watching.sync_live() for r in replicas))
        await settle()

        assert len({a.connection for a in slack.socket.acks}) == 4  # 2 replicas × 2 connections
        assert len(slack.calls_to("apps.connections.open")) == 4
        _acked_once_each(first)
        [cluster] = sim.engine.list_clusters()
        assert (await first.record(cluster.id)).status.value == "running"
        assert sum("ssh -p" in first.text_of(m) for m in slack.dms(ALICE)) == 1
        assert len(await first.requests_in_db()) == 1 and len(first.cards()) == 1
        assert _posted_twice(first) == []
