"""Injected Web API failures (`FakeSlack.fail_next`): per method, a queue of faults, each
answering its next `remaining` calls."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Fault:
    error: str
    status: int
    retry_after: int | None  # a 429's Retry-After (seconds)
    remaining: int


class Faults:
    def __init__(self) -> None:
        self._queued: dict[str, list[Fault]] = {}

    def add(self, method: str, fault: Fault) -> None:
        self._queued.setdefault(method, []).append(fault)

    def clear(self, method: str | None = None) -> None:
        if method is None:
            self._queued.clear()
        else:
            self._queued.pop(method, None)

    def take(self, method: str) -> Fault | None:
        """The fault answering this call to `method`, if one is queued."""
        queue = self._queued.get(method) or []
        if not queue:
            return None
        fault = queue[0]
        fault.remaining -= 1
        if fault.remaining <= 0:
            queue.pop(0)
        return fault
