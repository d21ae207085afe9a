"""In-process wake-ups: a wait ends on a ring or at its timeout, and never eats a cancel;
a store watching the waits learns which announcements to listen to."""

from __future__ import annotations

import asyncio

import pytest

from shepherd.store import signals as ch
from shepherd.store.signals import Signals
from shepherd.store.wakeups import CHANNELS, TASK_CHANNEL, announced, local_channels


async def test_a_ring_ends_the_wait() -> None:
    signals = Signals()
    event = signals.event("tasks")
    waiter = asyncio.create_task(Signals.wait(event, 60.0))
    await asyncio.sleep(0)  # let the waiter start waiting (an ordering step, not a delay)

    signals.ring("tasks")

    assert await waiter is True


async def test_the_timeout_ends_the_wait_unrung() -> None:
    assert await Signals.wait(Signals().event("tasks"), 0.01) is False


async def test_a_cancel_arriving_with_the_ring_is_not_swallowed() -> None:
    # A role is cancelled (shutdown) in the same loop turn as its wake-up is rung:
    # the wait must end in CancelledError, or the role never stops.
    signals = Signals()
    event = signals.event("tasks")
    waiter = asyncio.create_task(Signals.wait(event, 60.0))
    await asyncio.sleep(0)  # let the waiter start waiting (an ordering step, not a delay)

    signals.ring("tasks")
    waiter.cancel()

    with pytest.raises(asyncio.CancelledError):
        await waiter


def test_a_store_watching_hears_each_wait_as_it_begins() -> None:
    signals = Signals()
    waited: list[str] = []
    signals.watch(waited.append)
    first = signals.event(ch.TASKS)
    assert signals.event(ch.TASKS) is first  # the same wait: not told again
    signals.event(ch.task_channel("t1"))
    signals.ring(ch.TASKS)
    signals.event(ch.TASKS)  # a new wait after the ring
    assert waited == [ch.TASKS, ch.task_channel("t1"), ch.TASKS]


def test_every_local_channel_is_rung_by_the_announcement_it_listens_to() -> None:
    for channel, name in CHANNELS.items():
        assert announced(channel) == name
        assert local_channels(name, "") == [channel]
    assert announced(ch.task_channel("t1")) == TASK_CHANNEL
    assert local_channels(TASK_CHANNEL, "t1") == [ch.task_channel("t1")]
    assert announced("not-a-channel") is None
