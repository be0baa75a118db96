"""Audit rows carry the money: every command verb (bot/domain/commands.py USAGE, what
bot/slack/parsing.py reads), every button (bot/slack/ids.py Action) and every form
(ids.View) is walked once, and each state-changing one leaves exactly one successful row by the
person who acted — its subject, the rate, and a readable detail (on/off, the channel, the node,
the size, the reason). Reads of the audit trail and its export are recorded too. A command,
button or form added without a line in these tables fails the first test."""

import pytest

from bot.domain.claims import launch_attempt, recovery_version
from bot.domain.commands import USAGE
from bot.domain.models import Actor, RequestStatus
from bot.slack.actions import BUTTONS, GROW_ONCE, press, press_once
from bot.slack.blocks.launch_modal import FIELD_IDLE_MINUTES
from bot.slack.ids import (
    Action,
    AlternativeRef,
    ApprovalRef,
    ClusterRef,
    DigestRef,
    DutyRef,
    GrowRef,
    HoursRef,
    IdleRef,
    ReadinessRef,
    RecoveryRef,
    RelaunchRef,
    ReminderRef,
    RequestRef,
    View,
    VolumeRef,
    WaitRef,
    WithdrawRef,
)
from tests.e2e.harness import ALICE, BOB, CAROL, GENERAL, bot
from tests.e2e.test_readiness import readiness

READ = None  # reads and prompts: no row (what they show changes nothing)
# Extending is walked in the extension tests: its row (hours, dollars added, the new total) is
# built together with the extension's spend decision.
EXTENSION_TESTS = "extension"

COMMANDS = {
    "quote": "quote", "list": READ, "status": READ, "terminate": READ,  # a confirm prompt
    "recover": "recover", "autorecover": "autorecover", "notify": "notify", "logs": "logs",
    "audit": "read_audit", "audit export": "export_audit", "spend": READ, "volumes": READ,
    "volume": "grow_volume", "extend": EXTENSION_TESTS, "withdraw": "withdraw",
    "connect": "connect", "help": READ, "wait": "wait", "waiting": READ,
    "template": "save_template",  # `template list` reads; `template delete` is walked below
}
BUTTONS_WALKED = {
    Action.QUOTE_REQUEST_LAUNCH: READ,  # opens the form; View.LAUNCH_REQUEST writes
    Action.QUOTE_DISCARD: READ, Action.APPROVE: "approve", Action.REJECT: "reject",
    Action.RETRY_LAUNCH: "retry", Action.TERMINATE: "terminate", Action.RECOVER: "recover",
    Action.AUTORECOVER_ON: "autorecover", Action.KEEP_RUNNING: "keep_running",
    Action.CLAIM: "claim", Action.DELETE_VOLUME: "delete_volume",
    Action.KEEP_VOLUME: "keep_volume", Action.EXTEND: EXTENSION_TESTS,
    Action.KEEP_WAITING: "keep_waiting", Action.QUOTE_THIS: "quote",
    Action.CLUSTER_STATUS: READ,
    Action.REJECT_WITH_REASON: READ,  # opens the form; View.REJECT_REASON writes
    Action.GROW_VOLUME: READ,  # opens the form; View.GROW_VOLUME writes
    Action.RELAUNCH_ON_VOLUME: "quote", Action.HOURS_CHART: READ, Action.WITHDRAW: "withdraw",
    Action.EXTENSION_APPROVE: EXTENSION_TESTS, Action.EXTENSION_REJECT: EXTENSION_TESTS,
    Action.ACKNOWLEDGE: "acknowledge", Action.SNOOZE: "snooze",
    Action.RECOVER_ALL_MINE: "recover",  # one row per cluster it recovers, as Recover writes
    Action.WAIT_FOR_STOCK: "wait",
    Action.QUOTE_WAIT_FOR_STOCK: READ,  # opens the form; View.LAUNCH_REQUEST writes
    Action.KEEP_IDLE: "keep_idle",
}
FORMS = {View.LAUNCH_REQUEST: "request", View.GROW_VOLUME: "grow_volume",
         View.REJECT_REASON: "reject"}
MONEY = {"quote", "request", "approve", "reject", "withdraw", "retry", "terminate", "recover",
         "autorecover", "keep_running", "claim", "notify", "connect", "keep_waiting", "keep_idle",
         "grow_volume", "keep_volume", "delete_volume", "acknowledge", "snooze", "wait"}


def test_every_command_button_and_form_has_a_line():
    assert set(COMMANDS) == set(USAGE)
    assert set(BUTTONS_WALKED) == set(Action.ALL)
    assert set(FORMS) == set(View.ALL)


class Walk:
    def __init__(self, h):
        self.h = h
        self.mark = 0
        self.walked: set[str] = set()

    async def start(self):
        async with self.h.rt.db.transaction() as repos:
            self.mark = await repos.audit.count()

    async def new_rows(self):
        async with self.h.rt.db.transaction() as repos:
            total = await repos.audit.count()
            rows = list(reversed(await repos.audit.list(limit=max(total - self.mark, 1))))
        fresh = rows[-(total - self.mark):] if total > self.mark else []
        self.mark = total
        return fresh

    async def check(self, what, expected, *, by, subject=None, says=()):
        """The rows since the last check: `by`'s one successful row of `expected`."""
        self.walked.add(what)
        mine = [e for e in await self.new_rows() if e.actor_id == by and e.outcome == "ok"]
        if expected is READ:
            assert mine == [], (what, mine)
            return None
        assert [e.action for e in mine] == [expected], (what, mine)
        [row] = mine
        assert row.detail and row.detail != expected, (what, row)
        for words in says:
            assert words in row.detail, (what, row.detail)
        if subject is not None:
            assert row.subject_id == subject, (what, row)
        if expected in MONEY:
            assert row.amount_cents, (what, row)
            assert "$" in row.detail, (what, row.detail)
        return row

    async def slash(self, text, *, user=ALICE, **checks):
        await self.h.slash(text, user=user)
        verb = "audit export" if text.startswith("audit export") else text.split()[0]
        return await self.check(f"/{verb}", COMMANDS[verb], by=user, **checks)

    async def press(self, action, ref, *, user=ALICE, **checks):
        await press(BUTTONS[action], self.h.rt.services, ref, Actor(user_id=user))
        await self.h.rt.settle()
        return await self.check(action, BUTTONS_WALKED[action], by=user, **checks)

    async def click(self, surface, action, *, user=ALICE, **checks):
        await self.h.click(surface, action, user=user)
        return await self.check(action, BUTTONS_WALKED[action], by=user, **checks)

    async def request(self, text="quote h100x8 nodes=2", *, values=None):
        """Quote, Request launch, submit the form: three rows walked."""
        h = self.h
        await self.slash(text)
        card = h.last_ephemeral(ALICE, containing=Action.QUOTE_REQUEST_LAUNCH)
        await self.click(card, Action.QUOTE_REQUEST_LAUNCH)
        await h.submit(h.slack.last_view(ALICE), values=values)
        await self.check(View.LAUNCH_REQUEST, FORMS[View.LAUNCH_REQUEST], by=ALICE)
        [pending] = [r for r in await h.requests_in_db() if r.status is RequestStatus.PENDING]
        return h.cards()[-1], pending


@pytest.mark.slow  # a longer scenario: scheduled early (tests/conftest.py)
async def test_every_command_and_button_writes_its_row(tmp_path):
    async with bot(tmp_path) as h:
        walk = Walk(h)
        await walk.start()
        services = h.rt.services

        # A request, approved: the cluster bills, with a readiness rule nobody meets and an
        # idle rule its silent rank 0 sets off.
        card, request = await walk.request(
            "quote h100x8 nodes=2 storage=1000",
            values={**readiness("never printed"),
                    FIELD_IDLE_MINUTES: {FIELD_IDLE_MINUTES: "30"}})
        await walk.click(card, Action.APPROVE, user=BOB, subject=request.id,
                         says=(f"${request.hourly_cents / 100:,.2f}/h",))
        [launched] = [r for r in await h.requests_in_db() if r.id == request.id]
        cluster_id = launched.cluster_id
        await h.advance(60)
        record = await h.record(cluster_id)
        assert record.status.value == "running"

        await walk.slash("list")
        await walk.slash(f"status {cluster_id}")
        await walk.slash(f"logs {cluster_id} node=1", says=("node 1",))
        await walk.slash(f"notify {cluster_id} <#C0RANDOM|random>", says=("<#C0RANDOM>",))
        await walk.slash(f"autorecover {cluster_id} on", says=("turned on",))
        await walk.slash(f"autorecover {cluster_id} off", says=("turned off",))
        await walk.slash(f"connect {cluster_id}", subject=cluster_id)
        await walk.slash(f"template save walked {cluster_id}", says=("template walked",
                                                                      cluster_id))
        await h.slash("template list")
        await walk.check("template list", READ, by=ALICE)
        await h.slash("template delete walked")
        await walk.check("template delete", "delete_template", by=ALICE,
                         says=("template walked",))
        await walk.slash("spend")
        await walk.slash("volumes")
        await walk.slash("help")
        await walk.slash("audit", user=BOB, says=("entries",))
        await walk.slash(f"audit {cluster_id}", user=BOB, subject=cluster_id)
        await walk.slash("audit export", user=BOB, subject="2026-11", says=("CSV",))
        await walk.press(Action.CLUSTER_STATUS, ClusterRef(cluster_id=cluster_id))
        episode, used = recovery_version(record.observed)
        await walk.press(Action.AUTORECOVER_ON, RecoveryRef(
            cluster_id=cluster_id, episode=episode, attempts_used=used), says=("turned on",))
        await walk.slash(f"autorecover {cluster_id} off", says=("turned off",))
        await walk.press(Action.KEEP_RUNNING, ReminderRef(cluster_id=cluster_id, hour=1),
                         subject=cluster_id)
        walk.walked |= {"/extend", Action.EXTEND, Action.EXTENSION_APPROVE,
                        Action.EXTENSION_REJECT}  # see EXTENSION_TESTS

        # Not serving after its limit: the owner is asked, and keeps waiting.
        for _ in range(5):
            await h.advance(600)
        async with h.rt.db.transaction() as repos:
            watch = await repos.readiness.get(cluster_id)
        await walk.press(Action.KEEP_WAITING, ReadinessRef(cluster_id=cluster_id,
                                                           prompt=watch.prompts),
                         subject=cluster_id)
        assert watch.idle_episode == 1  # idle too: the owner keeps it for two hours
        await walk.press(Action.KEEP_IDLE, IdleRef(cluster_id=cluster_id, episode=1, hours=2),
                         subject=cluster_id, says=("kept 2 h",))

        # A node fails: one recovery by the button, another by the command.
        await h.fail_node(cluster_id)
        await h.advance(60)
        record = await h.record(cluster_id)
        assert record.status.value == "degraded"
        episode, used = recovery_version(record.observed)
        await walk.press(Action.SNOOZE, DutyRef(cluster_id=cluster_id, episode=episode),
                         subject=cluster_id)
        await walk.press(Action.ACKNOWLEDGE, DutyRef(cluster_id=cluster_id, episode=episode),
                         subject=cluster_id)
        await walk.press(Action.RECOVER, RecoveryRef(cluster_id=cluster_id, episode=episode,
                                                     attempts_used=used), subject=cluster_id)
        for _ in range(3):
            await h.advance(300)
        # Degraded again, in a storm's digest (opened here: a storm's own test makes one).
        await h.fail_node(cluster_id, rank=0)
        await h.advance(60)
        async with h.rt.db.transaction() as repos:
            digest = await repos.digests.open(GENERAL, now=h.clock.now())
            await repos.digests.join(digest.id, [cluster_id], now=h.clock.now())
        await walk.press(Action.RECOVER_ALL_MINE, DigestRef(digest_id=digest.id, degraded=1),
                         subject=cluster_id)
        for _ in range(3):
            await h.advance(300)
        await h.fail_node(cluster_id, rank=1)
        await h.advance(60)
        await walk.slash(f"recover {cluster_id}", subject=cluster_id)

        # Terminate: the command asks, the button does it.
        await walk.slash(f"terminate {cluster_id}")
        prompt = h.last_ephemeral(ALICE, containing=Action.TERMINATE)
        await walk.click(prompt, Action.TERMINATE, subject=cluster_id)
        await h.advance(120)
        record = await h.record(cluster_id)
        volume_id = record.volume_id
        assert volume_id is not None
        await walk.press(Action.HOURS_CHART, HoursRef(cluster_id=cluster_id,
                                                      hours=record.accrued_hours))
        await walk.press(Action.RELAUNCH_ON_VOLUME, RelaunchRef(cluster_id=cluster_id,
                                                                volume_id=volume_id))
        quote = h.last_ephemeral(ALICE, containing=Action.QUOTE_REQUEST_LAUNCH)
        await walk.press(Action.QUOTE_THIS, AlternativeRef(
            quote_id=request.quote_id, accelerator="h200-sxm-141gb", gpus_per_node=8,
            nodes=2, location="us-tx"))
        await walk.click(quote, Action.QUOTE_DISCARD)

        # The volume the cluster kept: grown (command and form), kept, deleted.
        await services.volumes.listing()
        await walk.slash(f"volume grow {volume_id} 2000", subject=volume_id,
                         says=("2,000 GB",))
        walk.walked.add(Action.GROW_VOLUME)  # opens the form (a local read): the form writes
        await press_once(GROW_ONCE, services, GrowRef(volume_id=volume_id, size_gb=2000),
                         Actor(user_id=ALICE),
                         lambda: services.volumes.grow(volume_id=volume_id, size_gb=3000,
                                                       actor=Actor(user_id=ALICE)))
        await walk.check(View.GROW_VOLUME, FORMS[View.GROW_VOLUME], by=ALICE,
                         subject=volume_id, says=("3,000 GB",))
        await walk.press(Action.KEEP_VOLUME, VolumeRef(volume_id=volume_id),
                         subject=volume_id)
        await walk.press(Action.DELETE_VOLUME, VolumeRef(volume_id=volume_id),
                         subject=volume_id)

        # A cluster launched outside the bot, claimed by an approver.
        outside = await h.rt.provider.quote_cluster("a100-sxm-80gb", 8, 2)
        adopted = await h.rt.provider.launch_cluster(outside.id, idempotency_key="outside")
        await services.reconciling.reconcile()
        await h.rt.settle()
        await walk.check("adopt", READ, by=BOB)
        await walk.press(Action.CLAIM, ClusterRef(cluster_id=adopted.id), user=BOB,
                         subject=adopted.id)

        # Requests that end otherwise: rejected, rejected with a reason, withdrawn twice.
        card, rejected = await walk.request()
        await walk.click(card, Action.REJECT, user=CAROL, subject=rejected.id)
        card, with_reason = await walk.request()
        await walk.click(card, Action.REJECT_WITH_REASON, user=CAROL)
        await services.approvals.reject(
            request_id=with_reason.id, quote_id=with_reason.quote_id,
            hourly_cents=with_reason.hourly_cents, reason="use l40s first",
            actor=Actor(user_id=CAROL))
        await h.rt.settle()
        await walk.check(View.REJECT_REASON, FORMS[View.REJECT_REASON], by=CAROL,
                         subject=with_reason.id, says=("use l40s first",))
        _, withdrawn = await walk.request()
        await walk.press(Action.WITHDRAW, WithdrawRef(request_id=withdrawn.id),
                         subject=withdrawn.id, says=("withdrawn",))
        _, typed = await walk.request()
        await walk.slash(f"withdraw {typed.id}", subject=typed.id, says=("withdrawn",))

        # A launch AI Reserve can't place, retried.
        h.sim.engine.set_capacity(accelerator="h100-sxm-80gb", location="us-tx",
                                  placeable_nodes=2)
        card, failing = await walk.request("quote h100x8 nodes=4")
        await walk.press(Action.APPROVE, ApprovalRef(
            request_id=failing.id, quote_id=failing.quote_id,
            hourly_cents=failing.hourly_cents), user=BOB, subject=failing.id)
        [failed] = [r for r in await h.requests_in_db() if r.id == failing.id]
        assert failed.status is RequestStatus.LAUNCH_FAILED
        await walk.press(Action.RETRY_LAUNCH, RequestRef(request_id=failed.id,
                                                         attempt=launch_attempt(failed)),
                         subject=failed.id)

        # Still no room: it waits for stock (the button), another one by the command.
        [again] = [r for r in await h.requests_in_db() if r.id == failing.id]
        assert again.status is RequestStatus.LAUNCH_FAILED
        await walk.press(Action.WAIT_FOR_STOCK, WaitRef(request_id=again.id),
                         subject=again.id, says=("waits for stock up to 72 h",))
        _, typed_wait = await walk.request("quote h100x8 nodes=4")
        await walk.press(Action.APPROVE, ApprovalRef(
            request_id=typed_wait.id, quote_id=typed_wait.quote_id,
            hourly_cents=typed_wait.hourly_cents), user=BOB, subject=typed_wait.id)
        await walk.slash(f"wait {typed_wait.id} hours=5", subject=typed_wait.id,
                         says=("waits for stock up to 5 h",))
        await walk.slash("waiting")
        h.sim.engine.set_capacity(accelerator="h100-sxm-80gb", location="us-tx",
                                  availability="none", placeable_nodes=0)
        await walk.slash("quote h100x8 nodes=4 location=us-tx")
        await walk.click(h.last_ephemeral(ALICE, containing=Action.QUOTE_WAIT_FOR_STOCK),
                         Action.QUOTE_WAIT_FOR_STOCK)

        assert {w[1:] for w in walk.walked if w.startswith("/")} == set(USAGE)
        assert set(Action.ALL) <= walk.walked
        assert set(View.ALL) <= walk.walked
        assert h.slack.messages(GENERAL)  # the requests' messages were posted where asked
