"""One run at a time per key; calls meanwhile fold into one more run (bot/slack/coalesce.py):
what App Home publishing relies on when a sweep refreshes many of one owner's clusters."""

from __future__ import annotations

import asyncio

import pytest

from bot.slack.coalesce import Coalesced


async def test_calls_side_by_side_fold_into_one_more_run_and_each_sees_its_change():
    state = {"version": 0}
    shown: list[int] = []
    gate = asyncio.Event()

    async def publish(key: str) -> None:
        seen = state["version"]
        await gate.wait()  # Slack answering
        shown.append(seen)

    home = Coalesced(publish)
    first = asyncio.create_task(home("U1"))
    await asyncio.sleep(0)  # the first publish is in flight
    later = []
    for version in range(1, 31):  # thirty changes while it is
        state["version"] = version
        later.append(asyncio.create_task(home("U1")))
    await asyncio.sleep(0)
    gate.set()
    await asyncio.gather(first, *later)
    assert shown == [0, 30]  # two publishes, not thirty-one; the last shows every change


async def test_keys_run_apart_and_a_failure_is_the_first_callers():
    ran: list[str] = []

    async def publish(key: str) -> None:
        ran.append(key)
        await asyncio.sleep(0)
        if key == "bad":
            raise RuntimeError("Slack said no")

    home = Coalesced(publish)
    results = await asyncio.gather(home("a"), home("b"), home("bad"), home("bad"),
                                   return_exceptions=True)
    assert results[:2] == [None, None] and isinstance(results[2], RuntimeError)
    assert results[3] is None  # folded into the run that failed: nothing more to tell it
    assert sorted(ran) == ["a", "b", "bad"]
    with pytest.raises(RuntimeError):
        await home("bad")  # the key is free again
