"""Issue 11, the planning half: `hours=` (planned spend, the envelope, auto-terminate and
`/cluster extend`), alternatives from the catalog with **Quote this**, the docs' advice,
`/cluster connect`, the no-SSH confirmation, the thread's story, list buttons and a rejection's
reason — over Slack, against the simulator."""

import json
import random
import sys
from datetime import timedelta

import yaml

from bot.reserve.schemas import Availability
from bot.slack.blocks.launch_modal import FIELD_NO_SSH_OK, FIELD_SSH_KEYS
from bot.slack.blocks.planning import planned_cents
from bot.slack.blocks.story import FIELD_REASON
from bot.slack.ids import Action
from tests.e2e.harness import ALICE, APPROVALS, BOB, DAVE, GENERAL, bot

SSH = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHostKeyForTests alice@laptop"
LOCATIONS = ("us-tx", "us-ga", "eu-ro", "ca-mtl")


def policy(max_hours: int = 8) -> str:
    return yaml.safe_dump({"approvals_channel": APPROVALS, "approvers": {"users": [BOB]},
                           "limits": {"max_lifetime_hours": max_hours}})


def words(message) -> str:
    """A message's text and blocks as read (not JSON-escaped)."""
    return message.text + json.dumps(message.blocks, ensure_ascii=False)


async def planned_cluster(h, text: str) -> str:
    card = await h.request(quote_text=text)
    await h.click(card, Action.APPROVE, user=BOB)
    cluster_id = (await h.requests_in_db())[-1].cluster_id
    assert cluster_id is not None
    await h.advance(60)
    return cluster_id


async def sweep_until(h, cluster_id: str, until, step: float = 120) -> None:
    """Poll and sweep every `step` seconds of provider time, as the scheduler would."""
    while h.clock.now() < until:
        h.clock.advance(step)
        await h.rt.services.watching.sync_live()
        await h.rt.services.envelopes.sweep()
        await h.rt.settle()


# --- 3. planned spend ---------------------------------------------------------------------


async def test_planned_spend_is_what_the_simulator_bills_for_random_durations(tmp_path):
    """`hours=H` prices H started hours; a run of any length in ((H−1) h, H h) is billed
    exactly that by AI Reserve's per-started-hour billing."""
    rng = random.Random(11)
    tried = held = 0
    async with bot(tmp_path) as h:
        for _ in range(6):
            seconds = rng.uniform(60, 9 * 3600)
            hours = int(seconds // 3600) + 1  # started hours, the first at ready
            await h.slash(f"quote h100x8 nodes=2 hours={hours}")
            card = h.last_ephemeral(ALICE, containing=f"Planned: {hours} h")
            cluster_id = await planned_cluster(h, f"quote h100x8 nodes=2 hours={hours}")
            rate = (await h.record(cluster_id)).hourly_cents
            total = planned_cents(rate, hours)
            assert f"${total / 100:,.2f}" in h.text_of(card)
            ready = h.sim.engine.get_cluster(cluster_id).ready_at
            h.clock.set(ready + timedelta(seconds=seconds))
            await h.rt.services.watching.sync_live()
            await h.rt.services.termination.terminate_for_policy(cluster_id=cluster_id)
            await h.advance(60)
            tried += 1
            held += h.sim.engine.get_cluster(cluster_id).billing.accrued_cents == total
        sys.stdout.write(f"\nplanned spend vs simulator billing: {tried} random durations "
                         f"tried, {held} held\n")
        assert held == tried


async def test_a_planned_run_becomes_the_envelope_and_terminates_itself(tmp_path):
    rng = random.Random(7)
    async with bot(tmp_path) as h:
        for hours in sorted(rng.sample(range(1, 6), 2)):
            cluster_id = await planned_cluster(h, f"quote h100x8 nodes=2 hours={hours}")
            record = await h.record(cluster_id)
            assert record.lifetime_hours == hours and record.auto_terminate
            ready = h.sim.engine.get_cluster(cluster_id).ready_at
            await sweep_until(h, cluster_id, ready + timedelta(hours=hours, minutes=10))
            billed = h.sim.engine.get_cluster(cluster_id).billing
            assert billed.accrued_hours == hours, (hours, billed)
            assert billed.accrued_cents == planned_cents(record.hourly_cents, hours)
            assert h.sim.engine.get_cluster(cluster_id).status.value in ("terminated",
                                                                         "terminating")
        # The last call before it went to the owner, with how to move the end.
        assert any(f"/cluster extend {cluster_id}" in words(m) for m in h.slack.dms(ALICE))


async def test_hours_bad_input_is_refused_by_name_and_nothing_is_quoted(tmp_path):
    async with bot(tmp_path, policy=policy(max_hours=72)) as h:
        for text, named in (("hours=0", "hours=0"), ("hours=abc", "hours=abc"),
                            ("hours=1.5", "hours=1.5"), ("hours=73", "73"),
                            ("hours=", "hours=")):
            await h.slash(f"quote h100x8 nodes=2 {text}")
            answer = h.text_of(h.slack.ephemerals(ALICE)[-1])
            assert named in answer and Action.QUOTE_REQUEST_LAUNCH not in answer, answer
        assert "beyond the spend policy's lifetime of 72 hours" in "".join(
            h.text_of(m) for m in h.slack.ephemerals(ALICE))
        assert h.sim.engine.list_clusters() == []
        async with h.rt.db.transaction() as repos:
            entries = await repos.audit.list(subject_id=GENERAL)
        assert not [e for e in entries if e.action == "quote" and e.outcome == "ok"]


async def test_extend_is_judged_by_the_policy_and_strangers_never(tmp_path):
    # This policy has no auto-approve tier: like a launch, every extension needs an approver.
    async with bot(tmp_path, policy=policy(max_hours=8)) as h:
        cluster_id = await planned_cluster(h, "quote h100x8 nodes=2 hours=4")
        await h.slash(f"extend {cluster_id} 3")
        preview = h.slack.ephemerals(ALICE)[-1]
        assert "needs an approver" in h.text_of(preview)
        await h.click(preview, Action.EXTEND, user=ALICE)
        assert (await h.record(cluster_id)).lifetime_hours == 4  # a card, not an extension
        await h.click(h.cards()[-1], Action.EXTENSION_APPROVE, user=BOB)
        assert (await h.record(cluster_id)).lifetime_hours == 7
        await h.slash(f"extend {cluster_id} 5", user=DAVE)
        assert "Only the owner" in h.text_of(h.slack.ephemerals(DAVE)[-1])
        for bad, named in (("0", "adds nothing"), ("abc", "abc"), ("", "hours to add")):
            await h.slash(f"extend {cluster_id} {bad}".strip())
            assert named in h.text_of(h.slack.ephemerals(ALICE)[-1])
        await h.slash("extend clu_nope 2")
        assert "clu_nope" in h.text_of(h.slack.ephemerals(ALICE)[-1])
        assert (await h.record(cluster_id)).lifetime_hours == 7  # nothing changed since
        await h.slash(f"extend {cluster_id} 10", user=BOB)  # an approver asking counts as one
        await h.click(h.slack.ephemerals(BOB)[-1], Action.EXTEND, user=BOB)
        record = await h.record(cluster_id)
        assert record.lifetime_hours == 17 and record.extended_by == BOB
        assert len(await h.notices(cluster_id, "17 hours")) == 1  # said in the thread, once
        async with h.rt.db.transaction() as repos:
            entries = await repos.audit.list(subject_id=cluster_id)
        outcomes = [e.outcome for e in entries if e.action == "extend"]
        assert outcomes.count("ok") == 2 and len(outcomes) >= 3


# --- 4. alternatives ----------------------------------------------------------------------


async def test_alternatives_fit_the_same_gpu_memory_and_quote_this_prices_one(tmp_path):
    async with bot(tmp_path) as h:
        for location in LOCATIONS:  # stock in ca-mtl only, besides us-tx
            h.sim.engine.set_capacity(accelerator="h100-sxm-80gb", location=location,
                                      availability=Availability.NONE)
        h.sim.engine.set_capacity(accelerator="h100-sxm-80gb", location="us-tx",
                                  availability=Availability.HIGH)
        h.sim.engine.set_capacity(accelerator="h100-sxm-80gb", location="ca-mtl",
                                  availability=Availability.MEDIUM)
        card = await h.quote("quote h100x8 nodes=2 location=us-tx")  # 16 × 80 = 1,280 GB
        text = words(card)
        assert "also has stock in ca-mtl (medium) at $62.40/h for the GPUs" in text
        # The closest GPU memory first, then the price: 1,280 GB, then 1,344 GB twice.
        assert "2 × NVIDIA A100 80GB SXM ×8* (1,280 GB GPU memory) · $36.80/h" in text
        assert "7 × AMD Instinct MI300X 192GB ×1* (1,344 GB GPU memory) · $24.15/h" in text
        assert "4 × NVIDIA L40S 48GB (PCIe) ×7* (1,344 GB GPU memory)" in text
        assert text.count(Action.QUOTE_THIS) == 3
        await h.click(card, Action.QUOTE_THIS, user=ALICE)  # the first: A100
        fresh = h.last_ephemeral(ALICE, containing="A100")
        assert Action.QUOTE_REQUEST_LAUNCH in h.text_of(fresh)
        assert "16 GPUs on 2 nodes" in h.text_of(fresh)


async def test_a_shape_without_stock_says_so_first_and_alternatives_need_stock(tmp_path):
    async with bot(tmp_path) as h:
        for accelerator in ("h100-sxm-80gb", "a100-sxm-80gb"):
            for location in LOCATIONS:
                h.sim.engine.set_capacity(accelerator=accelerator, location=location,
                                          availability=Availability.NONE)
        await h.slash("quote h100x8 nodes=2 location=us-tx")
        card = h.last_ephemeral(ALICE, containing="No availability")
        assert "No availability in us-tx" in str(card.blocks[0])
        text = h.text_of(card)
        assert "No other location lists stock" in text
        assert "A100" not in text and "H200" in text  # no stock anywhere: not offered
        assert Action.QUOTE_REQUEST_LAUNCH not in text and Action.QUOTE_THIS in text


# --- 5. the docs' advice ------------------------------------------------------------------


async def test_the_docs_advice_on_the_quote_and_in_the_form(tmp_path):
    async with bot(tmp_path) as h:
        bare = words(await h.quote("quote h100x8 nodes=2"))
        assert "deploy through the provider passthrough if you need a specific fabric" in bare
        assert "35–70 min to download" in bare and "`storage=1000`" in bare
        assert "a single machine: $3.49/h per GPU" in bare
        kept = words(await h.quote("quote h100x8 nodes=2 storage=1000"))
        assert "provider passthrough" in kept and "35–70 min" not in kept
        await h.click(await h.quote(), Action.QUOTE_REQUEST_LAUNCH, user=ALICE)
        assert "/dev/shm" in json.dumps(h.slack.last_view(ALICE))


# --- 7. connections on demand -------------------------------------------------------------


async def test_connect_dms_the_owner_fresh_details_and_refuses_strangers(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id = await planned_cluster(h, "quote h100x8 nodes=2 storage=100")
        first = len(h.slack.dms(ALICE))
        await h.slash(f"connect {cluster_id}")
        await h.slash(f"connect {cluster_id}", user=BOB)  # an approver asks: ALICE gets it
        dms = h.slack.dms(ALICE)[first:]
        assert len(dms) == 2 and all("ssh" in h.text_of(m) for m in dms)
        assert "mounted at `/workspace`" in h.text_of(dms[-1])
        assert not [m for m in h.slack.dms(BOB) if "ssh " in h.text_of(m)]
        assert f"<@{ALICE}> by DM" in h.text_of(h.slack.ephemerals(BOB)[-1])
        await h.slash(f"connect {cluster_id}", user=DAVE)
        assert "Only the owner" in h.text_of(h.slack.ephemerals(DAVE)[-1])
        assert not h.slack.dms(DAVE)
        await h.slash("connect clu_nope")
        assert "clu_nope" in h.text_of(h.slack.ephemerals(ALICE)[-1])
        await h.slash("connect")
        assert "needs a cluster id" in h.text_of(h.slack.ephemerals(ALICE)[-1])
        assert "ssh -p" not in h.channel_payloads() and "ssh " not in h.channel_payloads()


async def test_a_launch_without_an_ssh_key_needs_explicit_confirmation(tmp_path):
    async with bot(tmp_path) as h:
        await h.click(await h.quote(), Action.QUOTE_REQUEST_LAUNCH, user=ALICE)
        modal = h.slack.last_view(ALICE)
        reply = await h.requests.submit_view(modal, user_id=ALICE)
        assert reply.json["response_action"] == "errors"
        assert "nobody can log in" in reply.json["errors"][FIELD_NO_SSH_OK]
        await h.rt.settle()
        assert h.cards() == []
        reply = await h.requests.submit_view(modal, user_id=ALICE,
                                             values={FIELD_SSH_KEYS: {FIELD_SSH_KEYS: SSH}})
        assert reply.status == 200 and not reply.body
        await h.rt.settle()
        assert len(h.cards()) == 1


# --- 8. the thread, the list, the reason --------------------------------------------------


async def test_the_thread_tells_the_whole_story_once(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id = await planned_cluster(h, "quote h100x8 nodes=2 hours=3")
        await h.advance(3600)
        await h.rt.services.termination.terminate_for_policy(cluster_id=cluster_id)
        await h.advance(60)
        await h.advance(60)
        story = [h.text_of(m) for m in await h.notices(cluster_id)]
        order = ["Requested by", "Approved by <@U0BOB>", "Launching at AI Reserve",
                 "created", "Ready", "Connection details sent to <@U0ALICE> by DM"]
        found = [next(i for i, t in enumerate(story) if step in t) for step in order]
        assert found == sorted(found), story
        assert any("terminated" in t.lower() for t in story[found[-1]:]), story
        assert not any("ssh " in t for t in story)
        before = len(story)
        await h.rt.services.envelopes._notifier.refresh_cluster(cluster_id)  # nothing new
        assert len(await h.notices(cluster_id)) == before


async def test_list_rows_carry_status_and_terminate(tmp_path):
    async with bot(tmp_path) as h:
        cluster_id = await planned_cluster(h, "quote h100x8 nodes=2")
        await h.slash("list", user=DAVE)
        listing = h.last_ephemeral(DAVE, containing=Action.CLUSTER_STATUS)
        await h.click(listing, Action.CLUSTER_STATUS, user=DAVE)
        assert "running" in h.text_of(h.last_ephemeral(DAVE, containing="Nodes")).lower() \
            or "running" in h.text_of(h.slack.ephemerals(DAVE)[-1]).lower()
        await h.click(listing, Action.TERMINATE, user=DAVE)  # not theirs: refused
        assert h.sim.engine.get_cluster(cluster_id).status.value == "running"
        await h.slash("list")
        mine = h.last_ephemeral(ALICE, containing=Action.TERMINATE)
        await h.click(mine, Action.TERMINATE, user=ALICE)
        await h.click(mine, Action.TERMINATE, user=ALICE)  # a second press: claimed once
        assert "Already terminated" in h.text_of(h.slack.ephemerals(ALICE)[-1])
        await h.advance(30)
        assert h.sim.engine.get_cluster(cluster_id).status.value == "terminated"


async def test_a_rejection_carries_its_reason_to_the_card_and_the_requester(tmp_path):
    async with bot(tmp_path) as h:
        form = await h.reject_with_reason(await h.request(), "use h100x4 first <!channel>")
        [request] = await h.requests_in_db()
        assert request.status.value == "rejected"
        assert request.decision_note == "use h100x4 first <!channel>"
        outcome = h.text_of(h.cards()[-1])
        assert "use h100x4 first" in outcome and "<!channel>" not in outcome
        [dm] = [m for m in h.slack.dms(ALICE) if "rejected your launch request" in h.text_of(m)]
        assert "use h100x4 first" in h.text_of(dm) and "<!channel>" not in h.text_of(dm)
        await h.submit(form, user=BOB, values={FIELD_REASON: {FIELD_REASON: "again"}})
        assert "Already rejected" in h.text_of(h.slack.dms(BOB)[-1]) or \
            "Already rejected" in "".join(h.text_of(m) for m in h.slack.ephemerals(BOB))
        assert (await h.requests_in_db())[0].decision_note == "use h100x4 first <!channel>"
        assert "use h100x4 first" in h.text_of(h.progress(GENERAL)[0]) or any(
            "use h100x4 first" in h.text_of(m)
            for m in h.slack.thread(GENERAL, h.progress(GENERAL)[0].ts))
