"""Whose App Home a request's refresh must publish again: only those whose Home it can change.

A request is on two kinds of Home (bot/services/home.py): every approver's while it is pending
(the request and its quote: Approve, Reject), and its requester's while it waits for stock and
through its cluster (live clusters, the month's spend). A refresh is asked at every step of a
request — submitted, each approval, each step of its launch, each move of its cluster — and most
steps change neither: a first approval of two leaves the request pending as it was, a launch's
steps change neither its waiting nor a cluster. Publishing every approver's Home at each of them
cost a Home's facts, render and views.publish per approver per step.

So each replica remembers, per request, what the Homes it last published showed of it (the
request while pending; while waiting, and its cluster record) and publishes an audience's Homes
again only when that changed. Never fewer than needed, across replicas too: a replica that has
not published for a request (another one made its earlier changes, or it restarted) publishes;
the state a key holds is a whole row (`updated_at` and all), so a change and its undoing on
another replica is not taken for no change; a key is kept only once every publish it led to was
made. What is forgotten (the oldest of `KEPT`) is published again.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field

from bot.domain.models import ClusterRecord, LaunchRequest, RequestStatus

KEPT = 4096  # requests remembered per replica

Shown = tuple[LaunchRequest | None, LaunchRequest | None, ClusterRecord | None]


def shown(request: LaunchRequest, record: ClusterRecord | None) -> Shown:
    """What Homes show of `request`: approvers' (the request while pending), its requester's
    (the request while waiting for stock, and its cluster)."""
    return (request if request.status is RequestStatus.PENDING else None,
            request if request.status is RequestStatus.WAITING else None,
            record)


@dataclass
class Audiences:
    _published: OrderedDict[str, Shown] = field(default_factory=OrderedDict)

    async def whose(self, request: LaunchRequest, now: Shown,
                    approvers: Callable[[], Awaitable[Collection[str]]]) -> list[str]:
        """The people whose Home must be published for `request` showing `now` (`approvers`
        is asked only when theirs must: a user group's members may be a Slack call)."""
        before = self._published.get(request.id)
        users: list[str] = []
        if before is None or before[0] != now[0]:
            users.extend(await approvers())
        if before is None or before[1:] != now[1:]:
            users.append(request.requester_id)
        return users

    def published(self, request: LaunchRequest, now: Shown) -> None:
        """Every Home `whose` named for `now` was published (read after `now` was)."""
        self._published[request.id] = now
        self._published.move_to_end(request.id)
        while len(self._published) > KEPT:
            self._published.popitem(last=False)
