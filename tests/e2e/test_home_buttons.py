"""The App Home's buttons: each acts once, the presser is answered in a DM (the Home has no
response_url) and sees the Home published again — never `respond` without a response_url."""

import copy
import json
import logging

from bot.domain.models import RequestStatus
from bot.slack.ids import Action, unpack_any
from tests.e2e.harness import ALICE, BOB, CAROL, bot
from tests.e2e.test_buttons import TIMES, counted, deliver, nothing_went_wrong


def dm_count(h, user, text):
    return len([m for m in h.slack.dms(user) if text in h.text_of(m)])


async def test_every_home_button_acts_once_and_answers_in_a_dm(tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    async with bot(tmp_path) as h:
        bob_cluster = await _running_cluster_of(h, BOB)
        first = await h.request(quote_text="quote h100x8 nodes=2")
        second = await h.request(quote_text="quote h100x8 nodes=3")
        assert first is not second
        r1, r2 = [r for r in await h.requests_in_db() if r.requester_id == ALICE]
        await h.requests.app_home_opened(BOB)
        await h.rt.settle()
        # What Bob sees, pressed as he sees it: later presses come from this (stale) copy.
        home = copy.deepcopy(h.slack.home(BOB))
        home["id"] = "V0STALEHOME"
        pressed = []

        async def press(action_id, subject, times=TIMES):
            [target] = [b for b in h.slack.find_buttons(home) if b.action_id == action_id
                        and subject in json.dumps(unpack_any(b.value).model_dump())]
            published = len(h.slack.calls_to("views.publish"))
            await deliver(h, home, action_id, user=BOB, block_id=target.block_id, times=times)
            assert len(h.slack.calls_to("views.publish")) > published  # the Home refreshed
            pressed.append(target)

        terminations = counted(h, "terminate_cluster")
        await press(Action.TERMINATE, bob_cluster)
        assert len(terminations) == 1
        assert dm_count(h, BOB, f"Terminating `{bob_cluster}`") == 1

        await press(Action.APPROVE, r1.id)
        assert dm_count(h, BOB, "Approved. The card shows the outcome.") == 1
        await press(Action.REJECT, r2.id)
        assert dm_count(h, BOB, "Rejected. The card shows the outcome.") == 1
        await press(Action.REJECT, r1.id, times=1)  # stale: already approved
        assert dm_count(h, BOB, f"Already approved by <@{BOB}>") >= 1
        await press(Action.APPROVE, r2.id, times=1)  # stale: already rejected
        assert dm_count(h, BOB, f"Already rejected by <@{BOB}>") >= 1

        assert sorted((b.action_id, b.value) for b in pressed) == sorted(
            (b.action_id, b.value) for b in h.slack.find_buttons(home))  # every button
        statuses = {r.id: r.status for r in await h.requests_in_db()}
        assert statuses[r1.id] in (RequestStatus.APPROVED, RequestStatus.LAUNCHING,
                                   RequestStatus.LAUNCHED)
        assert statuses[r2.id] is RequestStatus.REJECTED
        async with h.rt.db.transaction() as repos:
            assert len(await repos.approvals.for_request(r1.id)) == 1
            assert len(await repos.approvals.for_request(r2.id)) == 1
        now_home = json.dumps(h.slack.home(BOB))
        assert r1.id not in now_home and r2.id not in now_home  # decided: gone from the Home
        nothing_went_wrong(h)
        assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert "respond is unsupported" not in caplog.text


async def _running_cluster_of(h, user):
    card = await h.request(user=user, quote_text="quote h100x8 nodes=2")
    approver = CAROL if user == BOB else BOB
    await h.click(card, Action.APPROVE, user=approver)
    cluster_id = [r for r in await h.requests_in_db() if r.requester_id == user][-1].cluster_id
    await h.advance(60)
    return cluster_id
