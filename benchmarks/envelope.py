"""The envelope property: with `enforce_lifetime`, a cluster approved for H hours is never billed
for more than H hours.

Each case launches a cluster on the simulator's engine (AI Reserve's own billing: hour k charged
at readyAt + k·1 h) at a random instant, approves a random envelope (sometimes extended once at
its prompt), and runs the envelope sweep's decision (`bot.domain.envelope.next_stage`) at every
tick of a scheduler with a random poll interval (5 s … 1 h, random phase), each sweep taking a
random time to reach the cluster, judging on an estimate of the provider's clock that is a
little off, and a terminate that lands a random provider latency after the decision. Billed hours
are the engine's `accrued_hours` after the terminate. Within the provider allowance (sweep ≤ 20 s,
clock error ≤ 2 s, provider ≤ 150 s; 172 s of 180 s) billed − approved must be 0 in every case;
beyond it (provider 3–15 min) the table shows what the margin protects against. Without
enforcement the 100 % prompt must come before the next hour is charged.

`python -m benchmarks envelope`; tests/domain/test_envelope_property.py runs it as a test.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from aireserve_sim.config import SimConfig
from aireserve_sim.engine import SimulatorEngine
from benchmarks.report import Table
from bot.clock import ManualClock
from bot.domain.envelope import PROVIDER_ALLOWANCE, ends_at, margin_for, next_stage
from bot.reserve.schemas import LaunchRequest, QuoteRequest, ShapeRequest
from bot.services.observing import record_from_wire

START = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
SWEEP_MAX, CLOCK_ERROR_MAX, PROVIDER_MAX = 20.0, 2.0, 150.0
assert PROVIDER_ALLOWANCE.total_seconds() >= SWEEP_MAX + CLOCK_ERROR_MAX + PROVIDER_MAX


@dataclass
class Outcome:
    approved: int  # hours, after any extension
    billed: int  # AI Reserve's accrued hours
    enforce: bool
    prompt_before_charge: bool  # not enforced: the 100 % prompt came before hour H + 1
    unused_seconds: float  # enforced: paid time left in the last hour at termination
    warned: bool = True  # enforced: the final warning came at an earlier sweep


def one_case(rng: random.Random, *, enforce: bool, slow_provider: bool = False) -> Outcome:
    clock = ManualClock(START)
    engine = SimulatorEngine(SimConfig(), clock, seed=rng.randrange(1 << 30))
    engine.advance(rng.uniform(0, 7200))  # readyAt at a random second (and fraction)
    quote = engine.quote(QuoteRequest(shape=ShapeRequest(
        accelerator="h100-sxm-80gb", gpus_per_node=8, nodes=rng.randint(2, 4))))
    wire = engine.launch(LaunchRequest(quote_id=quote.id))
    while (wire := engine.get_cluster(wire.id)).ready_at is None:
        engine.advance(1)
    hours = rng.randint(1, 48)
    record = record_from_wire(wire, owner_id="U0ALICE", channel_id="C0", request_id="r",
                              accelerator_name="H100", now=clock.now()
                              ).model_copy(update={"lifetime_hours": hours})
    poll = rng.choice([rng.uniform(5, 120), rng.uniform(5, 900), rng.uniform(600, 3600)])
    margin = margin_for(timedelta(seconds=poll))
    extend = rng.random() < 0.3
    clock_error = rng.uniform(-CLOCK_ERROR_MAX, CLOCK_ERROR_MAX)
    tick = clock.now() + timedelta(seconds=rng.uniform(0, poll))
    prompt_ok, warned = True, False
    while True:
        seen = tick + timedelta(seconds=rng.uniform(0, SWEEP_MAX))  # true provider time
        stage = next_stage(record, now=seen + timedelta(seconds=clock_error), enforce=enforce,
                           margin=margin)
        if stage is not None:
            record = record.model_copy(update={"envelope_stage": stage})
        if stage == "final":
            warned = True
        if stage in ("final", "due") and extend:  # an approver extends at the prompt
            extend, warned = False, False  # the longer envelope is warned about afresh
            record = record.model_copy(update={
                "lifetime_hours": record.lifetime_hours + rng.randint(1, 24),  # type: ignore[operator]
                "envelope_stage": "extended"})
        elif stage == "due":
            end = ends_at(record)
            assert end is not None
            prompt_ok = seen < end
            clock.set(max(clock.now(), end + timedelta(hours=1)))
            return Outcome(record.lifetime_hours or 0, engine.get_cluster(wire.id).billing
                           .accrued_hours, enforce, prompt_ok, 0.0)
        elif stage == "enforced":
            latency = (rng.uniform(PROVIDER_ALLOWANCE.total_seconds(), 900) if slow_provider
                       else rng.uniform(0, PROVIDER_MAX))
            landed = seen + timedelta(seconds=latency)
            clock.set(max(clock.now(), landed))
            engine.terminate(wire.id)
            end = ends_at(record)
            assert end is not None
            unused = (end - landed).total_seconds()
            clock.advance(7200)
            # An envelope shorter than the margin and two polls leaves no earlier sweep to warn
            # at (e.g. 1 hour polled every 40 min): only longer ones must have been warned.
            warnable = timedelta(hours=record.lifetime_hours or 0) > margin + \
                2 * timedelta(seconds=poll)
            return Outcome(record.lifetime_hours or 0, engine.get_cluster(wire.id).billing
                           .accrued_hours, enforce, prompt_ok, unused, warned or not warnable)
        tick += timedelta(seconds=poll)


@dataclass
class Figures:
    tried: int
    max_over: int  # max billed − approved hours
    over_cases: int
    prompts_late: int
    unused_mean_seconds: float
    unwarned: int  # enforced cases terminated without a final warning at an earlier sweep
    # (among envelopes longer than the margin + two poll intervals)


def run_cases(n: int, *, seed: int = 8, enforce: bool = True,
              slow_provider: bool = False) -> Figures:
    rng = random.Random(seed)
    outcomes = [one_case(rng, enforce=enforce, slow_provider=slow_provider) for _ in range(n)]
    overs = [o.billed - o.approved for o in outcomes]
    unused = [o.unused_seconds for o in outcomes if o.enforce]
    return Figures(tried=n, max_over=max(overs), over_cases=sum(1 for x in overs if x > 0),
                   prompts_late=sum(1 for o in outcomes if not o.prompt_before_charge),
                   unused_mean_seconds=sum(unused) / len(unused) if unused else 0.0,
                   unwarned=sum(1 for o in outcomes if not o.warned))


async def run() -> list[Table]:
    table = Table("Envelope property: billed hours vs approved hours (AI Reserve's engine)",
                  ["scenario", "cases", "max billed − approved", "cases over", "prompts late",
                   "unwarned", "mean paid time unused"])
    for label, kwargs in [("enforced, within the allowance", {}),
                          ("not enforced: 100 % prompt", {"enforce": False}),
                          ("enforced, provider 3–15 min slow", {"slow_provider": True})]:
        f = run_cases(1000, **kwargs)  # type: ignore[arg-type]
        enforced = kwargs.get("enforce", True)
        table.rows.append([label, str(f.tried), f"{f.max_over} h" if enforced else "(bills on)",
                           str(f.over_cases) if enforced else "-", str(f.prompts_late),
                           str(f.unwarned) if enforced else "-",
                           f"{f.unused_mean_seconds / 60:.1f} min" if enforced else "-"])
    table.notes.append("margin = poll interval + 3 min (sweep ≤ 20 s, clock error ≤ 2 s, "
                       "provider ≤ 150 s); the last row shows what the margin protects against")
    return [table]
