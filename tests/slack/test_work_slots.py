"""A listener's work after its ack takes a work slot (bot/slack/inflight.py): acks never wait
for one, the work does, and a listener that is done frees its slot."""

import asyncio

from slack_bolt.async_app import AsyncAck

from bot.slack.inflight import AckFirst, WorkSlots


async def test_acks_go_out_at_once_and_the_work_after_them_takes_turns():
    slots = WorkSlots(1)
    first, second = AckFirst(AsyncAck(), None, slots=slots), AckFirst(AsyncAck(), None,
                                                                    slots=slots)
    await first()  # acked, and its work holds the one slot
    waiting = asyncio.create_task(second())
    for _ in range(5):
        await asyncio.sleep(0)  # turns of the loop, not time
    assert second.response is not None and second.response.status == 200  # acked already
    assert not waiting.done()  # its work waits for the slot
    first.release()
    await asyncio.wait_for(waiting, 5)
    second.release()
    second.release()  # twice is harmless: the slot is freed once
    await asyncio.wait_for(AckFirst(AsyncAck(), None, slots=slots)(), 5)
    assert slots.locked()  # the third holds the one slot there is
