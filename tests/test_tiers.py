"""The suite's two tiers (tests/conftest.py): `make test` runs what stays inside pytest's own
processes, `make test-boundary` the rest. A test that starts a real bot or simulator process
must say so (`procs`): one that doesn't fails instead of running outside its lane, in the tier
that promises none."""

from __future__ import annotations

import sys

import pytest

from tests import procs


async def test_a_test_without_its_procs_mark_starts_no_process(tmp_path):
    child = procs.Child([sys.executable, "-c", "pass"], env={}, log_path=tmp_path / "log",
                        cwd=tmp_path)
    with pytest.raises(AssertionError, match="procs"):
        await child.spawn()
    assert child.proc is None

