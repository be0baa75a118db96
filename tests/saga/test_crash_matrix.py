"""A crash at every step of the launch saga × {provider fast, slow, quote expired meanwhile}:
exactly one cluster, linked to its request and owner, the SSH details sent once (tests/saga/
crash.py runs each cell in process: the launch task dies, the runtime is dropped and a new one
starts on the same database and simulator)."""

import pytest

from bot.domain.models import RequestStatus
from tests.saga.crash import MODES, POINTS, run


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("point", POINTS)
async def test_a_crash_at_any_step_leaves_one_linked_cluster(tmp_path, database_url, point,
                                                            mode):
    result = await run(tmp_path, point=point, mode=mode, database_url=database_url)
    assert result.clusters == 1
    assert result.per_request_max == 1
    assert result.unlinked == 0
    assert list(result.ssh_dms.values()) == [1]
    assert result.requests == [RequestStatus.LAUNCHED]
    # Only when no call had reached AI Reserve and the quote expired meanwhile is the request
    # priced again (and approved again); whenever a cluster exists, it is found first.
    assert result.repriced == (mode == "expired" and point in ("before_claim", "after_claim"))
