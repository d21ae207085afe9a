"""A role loop's store outage: its backoff sleeps on the app's clock, and two log lines tell it."""

from __future__ import annotations

import asyncio
import logging
import random
from datetime import timedelta

import pytest

from shepherd.errors import StoreDamagedError, StoreUnavailableError
from shepherd.outage import Outage
from shepherd.store.watch import StoreWatch
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


# -- one process's loops, watched together --------------------------------------
def watched(clock: FakeClock, watch: StoreWatch, name: str) -> Outage:
    return Outage(name, log=log, clock=clock, rng=random.Random(7), initial=1.0, watch=watch)


def test_a_read_ends_no_outage_another_loop_s_write_does(
    fake_clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    watch = StoreWatch(fake_clock.now)
    tasks, claims = watched(fake_clock, watch, "task writes"), watched(fake_clock, watch, "claims")
    caplog.set_level(logging.DEBUG, logger=log.name)
    start = fake_clock.now()
    for _ in range(5):  # a full disk: each write fails, the read after it succeeds
        tasks.failed(StoreUnavailableError("disk full"))
        fake_clock.advance(0.5)
        tasks.over(wrote=False)
    claims.failed(StoreUnavailableError("disk full"))
    assert watch.active
    assert watch.since == start
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.getMessage().split(":")[0] for r in warnings] == ["task writes", "claims"]
    assert not [r for r in caplog.records if "reachable again" in r.getMessage()]

    fake_clock.advance(1.0)
    beats = watched(fake_clock, watch, "registry")
    beats.over()  # a write: the store is back, for the loop that only read since too
    assert not watch.active
    assert tasks.failures == 0
    assert claims.failures == 1  # its own write has not succeeded yet
    fake_clock.advance(1.0)
    claims.over()
    back = [r.getMessage() for r in caplog.records if "reachable again" in r.getMessage()]
    assert sorted(m.split(":")[0] for m in back) == ["claims", "task writes"]
    assert watch.spans[-1] == (start, fake_clock.now() - timedelta(seconds=1))


def test_the_watch_covers_instants_in_an_outage_and_its_margin(fake_clock: FakeClock) -> None:
    watch = StoreWatch(fake_clock.now)
    before = fake_clock.now() - timedelta(seconds=1)
    watch.failed()
    start = fake_clock.now()
    assert watch.covers(start + timedelta(seconds=100), margin=0)  # still out: all after it
    assert not watch.covers(before, margin=10)
    fake_clock.advance(20)
    watch.wrote()
    end = fake_clock.now()
    assert watch.covers(start, margin=3)
    assert watch.covers(end + timedelta(seconds=3), margin=3)
    assert not watch.covers(end + timedelta(seconds=3.1), margin=3)
    assert watch.recently(end + timedelta(seconds=2), margin=3)
    assert not watch.recently(end + timedelta(seconds=4), margin=3)


def test_a_failure_dates_the_trouble_back_by_the_longest_wait(fake_clock: FakeClock) -> None:
    watch = StoreWatch(fake_clock.now, lead=5.0)
    fake_clock.advance(60)
    watch.failed()  # the call that failed may have waited store_timeout first
    assert watch.since == fake_clock.now() - timedelta(seconds=5)


def test_a_slow_call_is_a_span_of_trouble_of_its_own(fake_clock: FakeClock) -> None:
    watch = StoreWatch(fake_clock.now, lead=5.0)
    start = fake_clock.now()
    fake_clock.advance(4)
    watch.slow(4.0)  # a beat held back 4 s by another process's lock, then written
    assert not watch.active
    assert watch.covers(start + timedelta(seconds=1), margin=0)
    assert not watch.covers(start - timedelta(seconds=1), margin=0)


def test_an_outage_stays_covered_however_often_loops_fail_after_it(fake_clock: FakeClock) -> None:
    """Short troubles after an outage (a pool still reconnecting) never push it out."""
    watch = StoreWatch(fake_clock.now, lead=5.0)
    watch.failed()
    in_outage = fake_clock.now()
    fake_clock.advance(20)
    watch.wrote()  # the store answers a write
    for _ in range(40):  # then another loop fails and one writes, every second
        fake_clock.advance(0.5)
        watch.failed()
        fake_clock.advance(0.5)
        watch.wrote()
    assert watch.covers(in_outage, margin=0)
    assert len(watch.spans) == 1
    fake_clock.advance(60)
    watch.slow(1.0)  # a trouble of its own, well apart: a span of its own
    assert len(watch.spans) == 2
    assert watch.covers(in_outage, margin=0)
