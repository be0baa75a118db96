"""One run at a time per key, the calls meanwhile folded into one more run after it.

For work whose result only the latest state matters to — an App Home shows a person's clusters
*now*: a sweep that refreshes thirty of one owner's clusters side by side would otherwise
compute and publish their home thirty times. A call that arrives while a run for its key is in
flight returns once a run that started after it has finished, so what it changed is shown.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


@dataclass
class _Run:
    done: asyncio.Future[None]
    again: bool = False


@dataclass
class Coalesced(Generic[K]):
    work: Callable[[K], Awaitable[None]]
    _runs: dict[K, _Run] = field(default_factory=dict, init=False, repr=False)

    async def __call__(self, key: K) -> None:
        running = self._runs.get(key)
        if running is not None:  # fold into the run after the one in flight
            running.again = True
            await asyncio.shield(running.done)
            return
        run = self._runs[key] = _Run(done=asyncio.get_running_loop().create_future())
        try:
            while True:
                run.again = False
                await self.work(key)
                if not run.again:
                    return
        finally:
            del self._runs[key]
            run.done.set_result(None)  # the folded callers return (the first one raises)
