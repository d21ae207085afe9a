"""In-process wake-ups: a wait ends on a ring or at its timeout, and never eats a cancel."""

from __future__ import annotations

import asyncio

import pytest

from shepherd.store.signals import Signals


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
