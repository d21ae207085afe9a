"""A process whose heartbeats fail for `worker_ttl` stops taking work, says so once, and resumes.

Everything runs on a FakeClock: the registry's beats and pauses, and the
standing's reading of how long ago the last beat reached the store.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from shepherd.config import Settings
from shepherd.core.workers import Worker
from shepherd.errors import StoreUnavailableError
from shepherd.registry import Standing, WorkerRegistry
from shepherd.store.ops import BeatWorker, RegisterWorker, StopWorker
from shepherd.store.roles import RegistryStore
from shepherd.store.watch import StoreWatch
from shepherd.testing import FakeClock, advance_until
from support.fake_store import ByOperation, Handlers

if TYPE_CHECKING:
    pass

TTL = 10.0
PAUSED = "no heartbeat has reached the store"
RESUMED = "takes work again"


def lines(caplog: pytest.LogCaptureFixture, text: str) -> int:
    return sum(text in r.getMessage() for r in caplog.records)


async def test_beats_failing_for_less_than_the_ttl_change_nothing(fake_clock: FakeClock) -> None:
    standing = Standing(ttl=TTL, clock=fake_clock)
    standing.beat_failed()
    fake_clock.advance(TTL - 0.5)
    standing.beat_failed()

    assert standing.takes_work()
    assert standing.statistics() == {"paused": 0, "pauses": 0}


async def test_a_clock_moved_far_ahead_without_a_failed_beat_is_no_outage(
    fake_clock: FakeClock,
) -> None:
    standing = Standing(ttl=TTL, clock=fake_clock)
    fake_clock.advance(TTL * 100)

    assert standing.takes_work()


async def test_beats_failing_for_the_ttl_stop_work_with_one_line_until_a_beat_reaches_the_store(
    fake_clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="shepherd.registry")
    standing = Standing(ttl=TTL, clock=fake_clock)
    began = standing.beat_started()
    standing.beat_reached(began)
    fake_clock.advance(TTL)
    standing.beat_failed()

    assert not standing.takes_work()
    assert not standing.takes_work()  # asked again by every role: still one line
    waiting = asyncio.create_task(standing.wait_takes_work())
    await asyncio.sleep(0)  # let the waiter start waiting (an ordering step, not a delay)
    assert not waiting.done()
    assert lines(caplog, PAUSED) == 1
    assert "worker_ttl 10 s" in caplog.text

    standing.beat_reached(standing.beat_started())
    await asyncio.wait_for(waiting, 5)

    assert standing.takes_work()
    assert lines(caplog, RESUMED) == 1
    assert standing.statistics() == {"paused": 0, "pauses": 1}


async def test_the_ttl_counts_from_when_the_last_successful_beat_began(
    fake_clock: FakeClock,
) -> None:
    standing = Standing(ttl=TTL, clock=fake_clock)
    began = standing.beat_started()
    fake_clock.advance(4.0)  # the beat took 4 s to come back
    standing.beat_reached(began)
    fake_clock.advance(TTL - 4.0)
    standing.beat_failed()

    assert not standing.takes_work()  # its row may be 10 s old already


async def test_the_registry_reports_its_beats_to_the_standing(
    fake_clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="shepherd.registry")
    store = SwitchedStore()
    registry = WorkerRegistry(
        store,
        instance="h:1:a",
        roles=["scheduler"],
        agents=[],
        settings=Settings(worker_beat=1.0, worker_ttl=TTL),
        clock=fake_clock,
    )
    loop = asyncio.create_task(registry.run())
    try:
        await advance_until(fake_clock, lambda: store.beats >= 2, step=1.0, timeout=30)
        store.down = True
        await advance_until(
            fake_clock, lambda: not registry.standing.takes_work(), step=1.0, timeout=30
        )
        assert lines(caplog, PAUSED) == 1
        store.down = False
        await advance_until(fake_clock, registry.standing.takes_work, step=1.0, timeout=30)
        assert lines(caplog, RESUMED) == 1
        assert registry.statistics()["pauses"] == 1
    finally:
        loop.cancel()
        await asyncio.gather(loop, return_exceptions=True)


class SwitchedStore(ByOperation, RegistryStore):
    """The registry's operations; every one fails while `down` is set."""

    def __init__(self) -> None:
        self.down = False
        self.beats = 0

    def now(self) -> datetime:
        return datetime.now(UTC)

    @functools.cached_property
    def watch(self) -> StoreWatch:
        return StoreWatch(self.now)

    def handlers(self) -> Handlers:
        return {RegisterWorker: self.register, BeatWorker: self.beat, StopWorker: self.stop}

    def _check(self) -> None:
        if self.down:
            raise StoreUnavailableError("did not answer within store_timeout (5 s)")

    async def register(self, op: RegisterWorker) -> Worker:
        self._check()
        now = datetime.now(UTC)
        return Worker(
            instance=op.instance,
            host=op.host,
            pid=op.pid,
            roles=tuple(op.roles),
            agents=tuple(op.agents),
            started_at=now,
            beat_at=now,
        )

    async def beat(self, op: BeatWorker) -> bool:
        self._check()
        self.beats += 1
        return True

    async def stop(self, op: StopWorker) -> None:
        return None


class ClockedStore(SwitchedStore):
    """SwitchedStore on the test's clock (the watch's spans are on the store's clock)."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        self.clock = clock

    def now(self) -> datetime:
        return self.clock.now()


def beating(store: ClockedStore, clock: FakeClock, *, beat: float) -> asyncio.Task[None]:
    """A worker registry beating every `beat` s into `store`, running."""
    registry = WorkerRegistry(
        store,
        instance="h:1:a",
        roles=["scheduler"],
        agents=[],
        settings=Settings(worker_beat=beat, worker_ttl=TTL),
        clock=clock,
    )
    return asyncio.create_task(registry.run())


async def test_a_beat_more_than_two_beats_after_the_last_is_trouble_for_the_watch(
    fake_clock: FakeClock,
) -> None:
    store = ClockedStore(fake_clock)
    loop = beating(store, fake_clock, beat=0.1)
    try:
        await advance_until(fake_clock, lambda: store.beats >= 3, step=0.1, timeout=30)
        assert not store.watch.spans  # beats a beat apart: no trouble
        stopped = fake_clock.now()
        # The process stopped for 0.5 s (as by SIGSTOP), then went on: its clock
        # moved on, and its event loop was held back for real (blocked here, for
        # more than two beats of 0.1 s). A fake clock moved on alone is no
        # hold-up (the next test).
        fake_clock.advance(0.5)
        time.sleep(0.5)  # noqa: ASYNC251 - the blocked event loop is the fault under test
        beats = store.beats
        await advance_until(fake_clock, lambda: store.beats > beats, step=0.1, timeout=30)
        ((start, end),) = store.watch.spans
        assert end - start >= timedelta(seconds=0.5)
        assert end >= stopped + timedelta(seconds=0.5)
    finally:
        loop.cancel()


async def test_a_fake_clock_moved_on_alone_is_no_trouble_for_the_watch(
    fake_clock: FakeClock,
) -> None:
    store = ClockedStore(fake_clock)
    loop = beating(store, fake_clock, beat=1.0)
    try:
        await advance_until(fake_clock, lambda: store.beats >= 3, step=1.0, timeout=30)
        # A test moves time on faster than the beats: the loop was never held back.
        fake_clock.advance(10.0)
        beats = store.beats
        await advance_until(fake_clock, lambda: store.beats > beats + 2, step=5.0, timeout=30)
        assert not store.watch.spans
    finally:
        loop.cancel()
