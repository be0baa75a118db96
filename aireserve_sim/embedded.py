"""The simulator served in-process on loopback: the bot's default provider and the test fixture.

    async with EmbeddedSimulator(SimConfig.fast(), ManualClock()) as sim:
        sim.base_url    # "http://127.0.0.1:<port>/v1" — hand it to the client
        sim.admin_url   # "http://127.0.0.1:<port>/_sim" — controls, header X-Sim-Admin: 1
        sim.engine, sim.clock

Port 0 by default: the OS picks a free port, so parallel test runs never collide.
"""

from __future__ import annotations

from types import TracebackType

from aiohttp import web

from aireserve_sim.config import SimConfig
from aireserve_sim.engine import SimulatorEngine
from aireserve_sim.server import create_app
from bot.clock import Clock, SystemClock

ADMIN_HEADERS = {"X-Sim-Admin": "1"}


class EmbeddedSimulator:
    """An engine plus its HTTP server on `host:port`, for the life of an `async with` block.

    The engine exists from construction (so it can be inspected or seeded before serving);
    the URLs exist once the block is entered.
    """

    def __init__(
        self,
        config: SimConfig | None = None,
        clock: Clock | None = None,
        *,
        api_key: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        seed: int = 0,
    ) -> None:
        self.config = config or SimConfig()
        self.clock: Clock = clock or SystemClock()
        self.engine = SimulatorEngine(self.config, self.clock, seed=seed)
        self.api_key = api_key
        self._host = host
        self._port = port
        self._runner: web.AppRunner | None = None
        self._root: str | None = None

    @property
    def root_url(self) -> str:
        """`http://host:port`, without a path."""
        if self._root is None:
            raise RuntimeError("EmbeddedSimulator is not serving: use it with `async with`.")
        return self._root

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    @property
    def admin_url(self) -> str:
        return f"{self.root_url}/_sim"

    @property
    def port(self) -> int:
        return int(self.root_url.rsplit(":", 1)[1])

    async def start(self, *, port: int | None = None) -> None:
        """Bind and serve (what `__aenter__` does); idempotent. `port`: where to serve again
        after `close()` (the port the OS chose at first), so a client's URL holds."""
        if port is not None:
            self._port = port
        if self._runner is not None:
            return
        # No access log: the bot polls, and a line per poll would drown its own logs.
        runner = web.AppRunner(
            create_app(self.engine, api_key=self.api_key), access_log=None, shutdown_timeout=0.5
        )
        await runner.setup()
        try:
            site = web.TCPSite(runner, self._host, self._port)
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        host, port = runner.addresses[0][:2]
        self._runner = runner
        self._root = f"http://{_url_host(host)}:{port}"

    async def close(self) -> None:
        """Stop serving; the engine (and its state) stays readable."""
        runner, self._runner, self._root = self._runner, None, None
        if runner is not None:
            await runner.cleanup()

    async def __aenter__(self) -> EmbeddedSimulator:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
