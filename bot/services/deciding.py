"""A decision that may launch: recorded and audited first, then the launch starts, then Slack
is told.

Showing a decision in Slack — the approval card, the progress message and its story, the
approvers' homes — is paced per channel: seconds, more on a busy bot. AI Reserve is the money
path and never waits behind it (a real bot under load called it 7 s after the Approve click,
issue 32). The audit row of the decision is written before the launch can record anything, so
the trail reads approve, then launch.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, Protocol

from bot.domain.models import LaunchRequest, RequestStatus
from bot.domain.ports import Notifier

P = ParamSpec("P")


class LaunchScheduler(Protocol):
    def launch_soon(self, request_id: str) -> None: ...


class Deciding(Protocol):
    _launcher: LaunchScheduler
    _notifier: Notifier


Decide = Callable[Concatenate[Any, P], Coroutine[Any, Any, LaunchRequest]]


def launched_then_shown(method: Decide[P]) -> Decide[P]:
    """Wraps an (audited) decision: an approved request's launch starts, then it is shown."""

    @functools.wraps(method)
    async def run(service: Deciding, /, *args: P.args, **kwargs: P.kwargs) -> LaunchRequest:
        request = await method(service, *args, **kwargs)
        if request.status is RequestStatus.APPROVED:
            service._launcher.launch_soon(request.id)
        await service._notifier.refresh_request(request.id)
        return request

    return run
