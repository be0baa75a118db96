"""Three replicas on one PostgreSQL database, as real processes: one post per notice.

Through a launch, a degrade and a manual recovery, hours of reminders, a `kill -9` of the
sweeping replica while its claimed reminder is on its way to Slack (another replica takes the
sweeps over and, once the claim expires, posts it), a SIGTERM of its successor and a terminate:
0 duplicate and 0 missed posts, counted from every chat.postMessage FakeSlack accepted. The
sweeps run on one replica at a time, so AI Reserve sees no more calls per poll interval from
three replicas than from one (scenario: tests/replicas.py; figures: `make bench`).
"""

from __future__ import annotations

import pytest

from tests import replicas

# Kills and restarts replicas and counts posts (0 duplicated, 0 missed), with generous deadlines:
# the restarts lane (tests/conftest.py), which also balances the two lanes' lengths.
pytestmark = pytest.mark.procs(lane="restarts")


@pytest.mark.slow
@pytest.mark.postgres
async def test_three_replicas_post_every_notice_once(tmp_path, pg_url):
    figures = await replicas.run(tmp_path, database_url=pg_url, replicas=3, hours=3)
    assert figures.duplicated == [] and figures.duplicates == 0, figures
    assert figures.missed == 0, figures
    assert figures.reminders == 3 + 2  # every accrued hour reminded once, across the kill
    # The sweeps run on one replica: about one listing per poll interval, not three.
    assert figures.provider_calls_per_sweep <= 1.5, figures
    assert figures.takeover_seconds is not None and figures.takeover_seconds < 6, figures
