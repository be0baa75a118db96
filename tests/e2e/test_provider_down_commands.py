"""AI Reserve down, in process (issue 24, item 4): the simulator stops serving (every request
refused at the socket) while the bot takes Slack's requests. Each command that needs AI Reserve
says so honestly — "AI Reserve isn't answering … try again", or, for what was already priced
and decided, that it is stored and goes out when AI Reserve answers; what needs only the
database answers as usual. Back, what was stored goes out once."""

from __future__ import annotations

from bot.domain.models import RequestStatus
from bot.jobs import sweeps
from bot.slack.ids import Action
from tests.e2e.harness import ALICE, BOB, bot

DOWN = "AI Reserve isn't answering"


async def answered(h, text, user=ALICE):
    """What `/cluster <text>` showed `user` (its ack and its follow-ups), as one text."""
    before = len(h.slack.ephemerals(user))
    reply = await h.slash(text, user=user)
    assert reply.status == 200
    return reply.body + "".join(h.text_of(m) for m in h.slack.ephemerals(user)[before:])


async def test_every_command_needing_ai_reserve_answers_honestly_and_decisions_are_stored(
        tmp_path):
    async with bot(tmp_path) as h:
        cluster_id = await h.running_cluster()
        quote = await h.quote("quote h100x8 nodes=2")  # priced before the outage
        card = await h.request(quote_text="quote h100x8 nodes=2")  # priced and pending
        [*_, pending] = await h.requests_in_db()
        port, launched = h.sim.port, len(h.sim.engine.list_clusters())
        await h.sim.close()

        # What reads or asks AI Reserve now: it isn't answering, nothing changed, try again.
        for text in (f"status {cluster_id}", f"recover {cluster_id}", f"logs {cluster_id}",
                     f"connect {cluster_id}", "volumes", "quote h100x8 nodes=2"):
            said = await answered(h, text)
            assert DOWN in said and "try again" in said, (text, said)
        # What the database knows: answered as usual.
        said = await answered(h, "list")
        assert cluster_id in said and DOWN not in said

        # A launch form from a quote priced before: stored, its approval card posted.
        await h.click(quote, Action.QUOTE_REQUEST_LAUNCH, user=ALICE)
        reply = await h.submit(h.slack.last_view(ALICE), user=ALICE)
        assert reply.status == 200 and not reply.body
        [*_, submitted] = await h.requests_in_db()
        assert submitted.status is RequestStatus.PENDING

        # An approval of a priced request: taken and stored, not refused; its card says it is
        # not launched yet and why (not "— launching" as if AI Reserve had it).
        await h.click(card, Action.APPROVE, user=BOB)
        stored = {r.id: r for r in await h.requests_in_db()}[pending.id]
        assert stored.status is RequestStatus.LAUNCHING and stored.decided_by == BOB
        [shown] = [h.text_of(m) for m in h.cards() if pending.id in h.text_of(m)]
        assert "stored, not launched yet" in shown and "didn't confirm the launch" in shown

        # Terminate: stored, still billing, kept trying.
        await answered(h, f"terminate {cluster_id}")
        prompt = h.last_ephemeral(ALICE, containing="Terminate")
        await h.click(prompt, Action.TERMINATE, user=ALICE)
        said = h.text_of(h.last_ephemeral(ALICE, containing="hasn't taken the terminate"))
        assert "still billing" in said and "keep trying" in said

        # Back where it was: what was stored goes out, once.
        await h.sim.start(port=port)
        for _ in range(2):
            h.clock.advance(60)
            await sweeps.resume_launches(h.rt.services)
            await sweeps.finish_terminations(h.rt.services)
            await h.advance(30)
        stored = {r.id: r for r in await h.requests_in_db()}[pending.id]
        assert stored.status is RequestStatus.LAUNCHED, stored.last_error
        assert len(h.sim.engine.list_clusters()) == launched + 1  # one launch, not two
        assert (await h.record(cluster_id)).status.value == "terminated"
