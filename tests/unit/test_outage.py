"""A role loop's store outage: its backoff sleeps on the app's clock, and two log lines tell it."""

from __future__ import annotations

import asyncio
import logging
import random

import pytest

from shepherd.errors import StoreDamagedError, StoreUnavailableError
from shepherd.outage import Outage
from shepherd.testing import FakeClock

log = logging.getLogger("test.outage")


def outage(clock: FakeClock) -> Outage:
    return Outage("scheduler claims", log=log, clock=clock, rng=random.Random(7), initial=1.0)


async def test_the_pause_sleeps_its_backoff_on_the_clock(fake_clock: FakeClock) -> None:
    loop = outage(fake_clock)
    pause = asyncio.create_task(loop.pause(StoreUnavailableError("connection refused")))
    await asyncio.sleep(0)  # let the pause start sleeping (an ordering step, not a delay)
    (delay,) = fake_clock.wakeups()
    assert 0.5 <= delay <= 1.0  # full jitter below the first bound

    fake_clock.advance(delay)
    await pause

    second = asyncio.create_task(loop.pause(StoreUnavailableError("connection refused")))
    await asyncio.sleep(0)
    (delay,) = fake_clock.wakeups()
    assert 1.0 <= delay <= 2.0  # the bound doubles
    fake_clock.advance(delay)
    await second
    assert loop.failures == 2


async def test_the_end_of_an_outage_says_how_long_it_lasted_on_the_clock(
    fake_clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    loop = outage(fake_clock)
    caplog.set_level(logging.DEBUG, logger=log.name)
    loop.failed(StoreUnavailableError("connection refused"))
    fake_clock.advance(12)
    loop.failed(StoreUnavailableError("connection refused"))

    loop.over()

    assert not loop.active
    assert [r.levelname for r in caplog.records] == ["WARNING", "DEBUG", "INFO"]
    assert "reachable again after 12.0 s (2 failed attempts)" in caplog.records[-1].getMessage()


async def test_a_damaged_store_is_not_waited_out(fake_clock: FakeClock) -> None:
    with pytest.raises(StoreDamagedError):
        await outage(fake_clock).pause(StoreDamagedError("not a shepherd database"))
    assert fake_clock.wakeups() == []
