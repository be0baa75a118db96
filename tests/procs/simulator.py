"""`python -m bot simulator` as a child process, and its controls (`/_sim`)."""

from __future__ import annotations

import json
import re
import signal as signals
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aiohttp

from tests.procs.child import Child, base_env

API_KEY = "test-key"
_SIM_BANNER = re.compile(r"listening on (http://\S+) .* controls at (http://\S+) with")


class SimProcess:
    """`python -m bot simulator` on a virtual clock that starts at the real now."""

    def __init__(self, directory: Path, *, profile: str = "fast") -> None:
        self._proc = Child(
            argv=[sys.executable, "-m", "bot", "simulator", "--host", "127.0.0.1", "--port",
                  "0", "--virtual-clock", "--start-at", "now", "--profile", profile],
            env=base_env(), log_path=directory / "simulator.log", cwd=directory)
        self.base_url = ""
        self.admin_url = ""
        self.api_key = API_KEY
        self._session: aiohttp.ClientSession | None = None

    async def start(self, *, port: int = 0) -> None:
        """Start it (`port`: again where it was, after a `stop()`: the bots' URL still holds;
        its state starts afresh)."""
        self._proc.argv[self._proc.argv.index("--port") + 1] = str(port)
        offset = len(self._proc.logs())
        await self._proc.spawn()
        match = await self._proc.wait_for_log(_SIM_BANNER, offset=offset)
        self.base_url, self.admin_url = match[1], match[2]
        self._session = aiohttp.ClientSession()

    @property
    def port(self) -> int:
        return int(self.base_url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])

    async def stop(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
        self._proc.signal(signals.SIGTERM)
        if self._proc.proc is not None:
            await self._proc.wait()

    def logs(self) -> str:
        return self._proc.logs()

    async def admin(self, path: str, body: Mapping[str, Any] | None = None, *,
                    method: str = "POST") -> Any:
        """A `/_sim/<path>` control call; fails the test on a non-2xx answer."""
        assert self._session is not None
        async with self._session.request(method, f"{self.admin_url}/{path}",
                                          json=None if body is None else dict(body),
                                          headers={"X-Sim-Admin": "1"}) as response:
            text = await response.text()
            assert response.status < 300, f"/_sim/{path} → {response.status}: {text}"
            return json.loads(text) if text else None

    async def advance(self, seconds: float) -> Any:
        return await self.admin("clock/advance", {"seconds": float(seconds)})

    async def fault(self, route: str, *, status: int | None = None, count: int = 1,
                    delay_seconds: float | None = None,
                    retry_after_seconds: int | None = None) -> Any:
        """Arm a fault (`route` like "DELETE /v1/clusters/{id}"); see simulator/faults.py."""
        body: dict[str, Any] = {"route": route, "count": count}
        if status is not None:
            body["status"] = status
        if delay_seconds is not None:
            body["delaySeconds"] = float(delay_seconds)
        if retry_after_seconds is not None:
            body["retryAfterSeconds"] = retry_after_seconds
        return await self.admin("faults", body)

    async def faults(self) -> list[dict[str, Any]]:
        """The armed faults (a rule disappears once its `count` is used up)."""
        found: list[dict[str, Any]] = (await self.admin("faults", method="GET"))["data"]
        return found

    async def clear_faults(self) -> None:
        await self.admin("faults", method="DELETE")

    async def fail_node(self, cluster_id: str, rank: int = 1, mode: str = "unhealthy") -> Any:
        return await self.admin(f"clusters/{cluster_id}/nodes/{rank}/fail", {"mode": mode})

    async def clusters(self) -> list[dict[str, Any]]:
        """Every cluster the provider lists (wire JSON), newest first; faults apply."""
        assert self._session is not None
        found: list[dict[str, Any]] = []
        params = {"limit": "200"}
        while True:
            async with self._session.get(f"{self.base_url}/clusters", params=params,
                                         headers={"Authorization": f"Bearer {API_KEY}"}) as r:
                assert r.status == 200, await r.text()
                page = await r.json()
            found += page["data"]
            if not page.get("nextCursor"):
                return found
            params["cursor"] = page["nextCursor"]
