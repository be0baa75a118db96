"""What the simulator's server keeps besides the engine's own state: the bearer key, the rate
limiter, the idempotency keys and the injected faults. The server (server.py) and the `/_sim`
controls (control.py) both act on it; it knows neither."""

from __future__ import annotations

from dataclasses import dataclass, field

from aireserve_sim.engine import SimulatorEngine
from aireserve_sim.faults import FaultInjector
from aireserve_sim.idempotency import IdempotencyStore
from aireserve_sim.ratelimit import RateLimiter


@dataclass
class ServerState:
    """What the server keeps besides the engine's own state."""

    engine: SimulatorEngine
    api_key: str | None
    limiter: RateLimiter
    idempotency: IdempotencyStore = field(default_factory=IdempotencyStore)
    faults: FaultInjector = field(default_factory=FaultInjector)

    def reset(self) -> None:
        """`POST /_sim/reset`: a fresh engine and no memory of earlier requests."""
        self.engine.reset()
        self.faults.clear()
        self.idempotency.clear()
        self.limiter.reset()
