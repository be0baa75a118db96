"""`sim …`: the local workspace's controls of the embedded AI Reserve, typed in the terminal or
pressed in the browser (devslack/browser.py) — one implementation for both.

    sim advance 1h    sim fail    sim unrecoverable    sim log Application startup complete

`sim advance` moves AI Reserve's clock and the bot's as a real clock would: in steps no longer
than the poll interval, each step's duties run to the end before the next. The money duties
(envelopes ended before the hour beyond them is charged, terminates tried again) run at every
step, as the scheduler runs them; launches resumed, stock looked for and volumes reminded at the
scheduler's own intervals; and the poll at every step for two minutes after AI Reserve changed
(its clusters as listed, their logs) or a `sim` line changed it — what the bot does about a
change comes at its own pace: a log read a minute, a node back, a DM — and in the minute before
a charge, otherwise once a minute (the bot's own deadlines — reminders, readiness and idle
limits, escalations — are minutes apart: one may come up to a minute later than under a real
clock, never past a charge). A quiet poll is skipped: an hour of a running cluster is about a
hundred polls, not 720.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from bot.domain.errors import DomainError
from bot.jobs import scheduler, sweeps
from bot.reserve import errors as api
from bot.services.container import Services
from bot.services.provider_errors import is_provider_trouble

if TYPE_CHECKING:
    from bot.app.devtools import EmbeddedSimulator
    from bot.app.process import Runtime

HELP = """\
  sim advance N[s|m|h]        move AI Reserve's clock and the bot's forward a poll interval at
                              a time, the money duties run at each step (as real time would)
  sim fail [CLUSTER] [RANK]   AI Reserve loses a node (the newest cluster, rank 1 by default)
  sim unrecoverable [CLUSTER] [RANK]   that node can't be brought back by recovery
  sim log [CLUSTER] [node=RANK] LINE   the workload on that node (rank 0 by default) prints
                              LINE, e.g. `sim log Application startup complete`, then poll"""

# What the browser offers as buttons: (label, the line it runs).
CONTROLS = (("+1 min", "sim advance 1m"), ("+10 min", "sim advance 10m"),
            ("+1 h", "sim advance 1h"), ("Lose a node", "sim fail"))

UNITS = {"s": 1, "m": 60, "h": 3600}
QUIET_POLL_LIMIT = timedelta(minutes=1)  # a poll with nothing new is skipped at most this long
CHARGE_WINDOW = timedelta(minutes=1)  # before a charge every poll runs: no hour slips past it
# After AI Reserve changed (or a `sim` line changed it) every poll runs for a while: what the
# bot does about a change comes at its own pace (a log read a minute, a node back, a DM).
ACTIVE_WINDOW = timedelta(minutes=2)

class MovableClock(Protocol):
    """The bot's and AI Reserve's shared clock, which `sim advance` moves (make run's
    OffsetClock; a test's ManualClock)."""

    def now(self) -> datetime: ...

    def advance(self, seconds: float) -> datetime: ...


Sweep = Callable[[Services], Awaitable[object]]
Say = Callable[[str], None]
# The sweeps the scheduler runs less often than every poll, with their intervals (seconds).
SPACED: tuple[tuple[str, int], ...] = (
    ("resume_launches", scheduler.RESUME_SECONDS),
    ("look_for_stock", scheduler.STOCK_SECONDS),
    ("remind_volumes", scheduler.VOLUME_SECONDS),
)
MONEY = ("enforce_envelopes", "finish_terminations")


def _sweep(name: str) -> Sweep:
    sweep: Sweep = getattr(sweeps, name)  # looked up at each use: tests count the calls
    return sweep


@dataclass
class _Troubles:
    """AI Reserve refusing a sweep during one advance: said once per sweep, then counted."""

    say: Say
    counts: dict[str, int] = field(default_factory=dict)

    def seen(self, sweep: str, exc: Exception) -> None:
        if sweep not in self.counts:
            self.say(f"sim: {sweep}: AI Reserve: {exc}")
        self.counts[sweep] = self.counts.get(sweep, 0) + 1

    def sum_up(self) -> None:
        for sweep, count in self.counts.items():
            if count > 1:
                self.say(f"sim: {sweep}: AI Reserve refused it {count:,} times in all")


class Simulation:
    """The `sim` lines over a running bot with its embedded simulator and offset clock."""

    def __init__(self, rt: Runtime, clock: MovableClock, *, say: Say) -> None:
        self._rt = rt
        self._clock = clock
        self.say = say  # progress and troubles, as they happen
        self._lock = asyncio.Lock()  # the terminal and the browser share one clock
        self._last_poll: datetime | None = None  # this simulation's own polls, any line's
        self._seen: object = None  # what AI Reserve showed at the last of them
        self._changed_at: datetime | None = None  # when that last changed

    def now(self) -> datetime:
        return self._clock.now()

    async def run(self, line: str, say: Say | None = None) -> str:
        """Run one `sim …` line; the answer to show (the usage when it isn't one). Progress
        goes to `say` (by default the one given at construction) as it happens."""
        async with self._lock:
            try:
                return await self._run(line.split()[1:], say or self.say)
            except (ValueError, LookupError, DomainError, api.ApiError) as exc:
                return f"sim: {exc}"

    async def _run(self, words: list[str], say: Say) -> str:
        simulator = self._rt.simulator
        if simulator is None:
            return "sim: only with the embedded simulator (AIRESERVE_API_URL is set)"
        verb, args = (words[0], words[1:]) if words else ("", [])
        if verb == "advance" and len(args) == 1 and args[0][:-1].isdigit() \
                and args[0][-1] in UNITS:
            await self._advance(int(args[0][:-1]) * UNITS[args[0][-1]], say)
            return f"AI Reserve's clock is now {self._clock.now():%Y-%m-%d %H:%M:%S} UTC"
        if verb == "log" and args:
            return await self._log(simulator, args)
        if verb in ("fail", "unrecoverable") and len(args) <= 2:
            if args and args[0].startswith("clu_"):
                cluster_id, args = args[0], args[1:]
            else:  # the newest live cluster: ids are hard to type
                live = simulator.engine.list_clusters()
                if not live:
                    return "sim: no cluster yet"
                cluster_id = live[0].id
            rank = int(args[0]) if args else 1
            if verb == "fail":
                simulator.engine.fail_node(cluster_id, rank, "unhealthy")
                await self._poll()
                return f"node {rank} of {cluster_id} is down"
            simulator.engine.set_recoverable(cluster_id, rank, False)
            return f"node {rank} of {cluster_id} can't be recovered now"
        return "sim: " + HELP.strip()

    async def _advance(self, seconds: int, say: Say) -> None:
        """Move AI Reserve's clock and the bot's as a real clock would (the module's doc)."""
        services = self._rt.services
        step = self._rt.settings.poll_interval_seconds
        steps = -(-seconds // step)
        if seconds > step:  # an hour is hundreds of steps: say why it takes a while
            say(f"  (moving the clocks in {steps} steps of {step} s: the money duties at each, "
                "the poll whenever something can have changed, at least once a minute…)")
        troubles = _Troubles(say)
        elapsed = 0
        while elapsed < seconds:
            moved = min(step, seconds - elapsed)
            self._clock.advance(moved)
            before, elapsed = elapsed, elapsed + moved
            told = False
            for name in MONEY:
                told = bool(await self._try(name, services, troubles)) or told
            for name, every in SPACED:
                if elapsed // every > before // every:
                    await self._try(name, services, troubles)
                    told = True
            now = self._clock.now()
            try:
                state, charge_at = _provider_state(self._provider())
            except api.ApiError:  # AI Reserve can't say: the poll finds out
                state, charge_at = object(), None
            if state != self._seen:
                self._seen, self._changed_at = state, now
            if (self._last_poll is None or self._changed_at is None
                    or now - self._changed_at <= ACTIVE_WINDOW
                    or now - self._last_poll >= QUIET_POLL_LIMIT
                    or (charge_at is not None and charge_at - now <= CHARGE_WINDOW)):
                self._last_poll = now
                await self._try("watch_and_tell", services, troubles)  # tells as it goes
            elif told:
                await self._try("deliver_outbox", services, troubles)
        troubles.sum_up()

    async def _try(self, name: str, services: Services, troubles: _Troubles) -> object:
        """One sweep, as the scheduler runs it: AI Reserve's trouble waits for the next step."""
        try:
            return await _sweep(name)(services)
        except Exception as exc:
            if not is_provider_trouble(exc):
                raise
            troubles.seen(name, exc)
            return None

    def _provider(self) -> EmbeddedSimulator:
        simulator = self._rt.simulator
        assert simulator is not None
        return simulator

    async def _log(self, simulator: EmbeddedSimulator, args: list[str]) -> str:
        """`sim log [CLUSTER] [node=RANK] LINE`: what the workload prints (readiness demo)."""
        cluster_id = args.pop(0) if args[0].startswith("clu_") else None
        rank = 0
        if args and args[0].startswith("node=") and args[0][5:].isdigit():
            rank = int(args.pop(0)[5:])
        if not args:
            return "sim: say what the node prints, e.g. `sim log Application startup complete`"
        if cluster_id is None:  # the newest live cluster: ids are hard to type
            live = simulator.engine.list_clusters()
            if not live:
                return "sim: no cluster yet"
            cluster_id = live[0].id
        line = " ".join(args)
        simulator.engine.append_log(cluster_id, rank, line)
        await self._poll()
        return f"node {rank} of {cluster_id} printed: {line}"

    async def _poll(self) -> None:
        """Poll at once (after changing AI Reserve): the next quiet poll counts from here."""
        await sweeps.watch_and_tell(self._rt.services)
        self._last_poll = self._changed_at = self._clock.now()


def _provider_state(simulator: EmbeddedSimulator) -> tuple[object, datetime | None]:
    """What a poll could learn from AI Reserve (its clusters as listed, the last log line of
    each live node), and the soonest charge or payment deadline among them."""
    engine = simulator.engine
    marks: list[object] = []
    soonest: datetime | None = None
    for cluster in engine.list_clusters():
        marks.append(cluster.model_dump_json())
        billing = cluster.billing
        for due in (billing.next_accrual_at, billing.grace_ends_at):
            if due is not None and (soonest is None or due < soonest):
                soonest = due
        if cluster.status.is_live:
            for node in cluster.nodes:
                tail = engine.logs(cluster.id, node=node.rank, tail=1).lines
                marks.append(tail[-1].model_dump_json() if tail else None)
    return tuple(marks), soonest
