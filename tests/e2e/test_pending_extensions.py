"""Issue 27.6, over Slack against the simulator: an extension asked for and waiting for the
approvers is not forgotten — it is on the approvers' Homes, the envelope's DMs mention it, and
when the envelope ends first its card stops offering Approve and the owner is told."""

from __future__ import annotations

import json
from datetime import timedelta

from bot.slack.ids import Action
from tests.e2e.harness import ALICE, BOB, bot
from tests.e2e.test_extensions import ask, extension_cards, planned, policy, words


async def test_a_pending_extension_is_shown_mentioned_and_closed_at_the_envelopes_end(tmp_path):
    async with bot(tmp_path, policy=policy()) as h:
        cluster_id = await planned(h)  # a planned run of 4 h: it ends at its envelope
        await h.click(await ask(h, cluster_id, 3), Action.EXTEND, user=ALICE)  # needs Bob
        [card] = extension_cards(h)
        assert Action.EXTENSION_APPROVE in words(card)

        await h.requests.app_home_opened(BOB)
        await h.rt.settle()
        home = json.dumps(h.slack.home(BOB), ensure_ascii=False)
        assert "Nothing is waiting for your approval" not in home, home
        assert "asks to extend" in home and Action.EXTENSION_APPROVE in home

        ready = h.sim.engine.get_cluster(cluster_id).ready_at
        margin = h.rt.services.envelopes.margin

        async def at(offset: timedelta) -> None:
            h.clock.set(ready + offset)
            await h.rt.services.watching.sync_live()
            await h.rt.services.envelopes.sweep()
            await h.rt.settle()

        await at(timedelta(hours=3))  # the last call, an hour before
        [last_call] = [words(m) for m in h.slack.dms(ALICE) if "terminates in" in words(m)]
        assert "asks to extend" in last_call and "waiting for" in last_call, last_call

        await at(timedelta(hours=4) - margin)  # the envelope ends: terminated
        [card] = extension_cards(h)
        assert Action.EXTENSION_APPROVE not in words(card), words(card)
        assert "Not extended" in words(card)
        told = [words(m) for m in h.slack.dms(ALICE) if "waiting for approvers when its "
                "envelope ended" in words(m)]
        assert len(told) == 1 and "nothing was extended" in told[0]
