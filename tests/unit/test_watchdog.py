"""The event loop watchdog: one warning per block, while it blocks; one line when it ends.

Each test runs an event loop in a thread of its own and blocks it with a
callback that waits for the watchdog's warning: the wait returns True only if
the warning arrived while the loop was still blocked.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from shepherd.watchdog import Watchdog
from support.logs import LogWatch

#: Seconds a test waits for what it expects before failing (a backstop, not a timing claim).
PATIENCE = 10.0
THRESHOLD = 0.1


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop running in a thread of its own."""
    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever, name="test-loop", daemon=True)
    runner.start()
    try:
        yield loop
    finally:
        loop.call_soon_threadsafe(loop.stop)
        runner.join(PATIENCE)
        loop.close()


@pytest.fixture
def watch() -> Iterator[LogWatch]:
    with LogWatch("shepherd.watchdog") as watch:
        yield watch


def start(watchdog: Watchdog, loop: asyncio.AbstractEventLoop) -> None:
    async def on_the_loop() -> None:
        watchdog.start()

    asyncio.run_coroutine_threadsafe(on_the_loop(), loop).result(PATIENCE)


def on_the_loop(loop: asyncio.AbstractEventLoop, fn: Callable[[], object]) -> object:
    """Run `fn` as a callback of the loop (it may block it); return what it returned."""
    done = threading.Event()
    outcome: list[object] = []

    def callback() -> None:
        outcome.append(fn())
        done.set()

    loop.call_soon_threadsafe(callback)
    assert done.wait(PATIENCE), "the loop never ran the callback"
    return outcome[0]


def is_warning(record: logging.LogRecord) -> bool:
    return record.levelno == logging.WARNING and "event loop blocked" in record.getMessage()


def is_unblocked(record: logging.LogRecord) -> bool:
    return record.levelno == logging.INFO and "unblocked after" in record.getMessage()


def block_until_warned(watch: LogWatch) -> bool:
    """Block the loop (this runs on it) until the watchdog warns; True if it did."""
    return watch.wait_for(is_warning, timeout=PATIENCE) is not None


def test_a_blocked_loop_is_reported_while_it_blocks_then_when_it_runs_again(
    loop: asyncio.AbstractEventLoop, watch: LogWatch
) -> None:
    blocks: list[object] = []
    watchdog = Watchdog(threshold=THRESHOLD, on_block=lambda: blocks.append(1))
    start(watchdog, loop)
    try:
        assert on_the_loop(loop, lambda: block_until_warned(watch)) is True

        assert watch.wait_for(is_unblocked, timeout=PATIENCE) is not None
    finally:
        watchdog.stop()
    (warning,) = watch.matching(is_warning)
    assert warning.threadName == "shepherd-watchdog"
    message = warning.getMessage()
    assert "code outside any agent handler or workflow" in message
    # The culprit: the innermost application frame (the log watch's wait, which the
    # test's callback calls), and the standard library's frame it is stuck in.
    assert "logs.py" in message
    assert "in wait_for" in message
    assert "threading.py" in message
    assert warning.blocked_for >= THRESHOLD  # type: ignore[attr-defined]
    (unblocked,) = watch.matching(is_unblocked)
    assert unblocked.blocked_for >= THRESHOLD  # type: ignore[attr-defined]
    statistics = watchdog.statistics()
    assert statistics.episodes == 1 == len(blocks)
    assert statistics.longest_block >= THRESHOLD
    assert statistics.blocked_for == 0.0


def test_one_warning_per_episode_however_long_it_lasts(
    loop: asyncio.AbstractEventLoop, watch: LogWatch
) -> None:
    watchdog = Watchdog(threshold=THRESHOLD)

    def unblocked_times(times: int, record: logging.LogRecord) -> bool:
        return len(watch.matching(is_unblocked)) == times

    def block_long(episode: int) -> bool:
        warned = watch.wait_for(
            lambda _: len(watch.matching(is_warning)) == episode, timeout=PATIENCE
        )
        # Stay blocked through several more of the watchdog's checks.
        return warned is not None and poll(
            lambda: watchdog.statistics().blocked_for >= 5 * THRESHOLD
        )

    start(watchdog, loop)
    try:
        for episode in (1, 2):
            assert on_the_loop(loop, functools.partial(block_long, episode)) is True
            assert watch.wait_for(functools.partial(unblocked_times, episode), timeout=PATIENCE)
    finally:
        watchdog.stop()
    assert len(watch.matching(is_warning)) == 2
    statistics = watchdog.statistics()
    assert statistics.episodes == 2
    assert statistics.longest_block >= 5 * THRESHOLD


def poll(predicate: Callable[[], bool]) -> bool:
    """Poll `predicate` in this thread until it holds (True) or PATIENCE passes (False)."""
    pause = threading.Event()
    for _ in range(int(PATIENCE / 0.01)):
        if predicate():
            return True
        pause.wait(0.01)
    return predicate()


def counting(watchdog: Watchdog, name: str) -> threading.Semaphore:
    """A semaphore released each time the watchdog's method `name` runs."""
    calls = threading.Semaphore(0)
    original = getattr(watchdog, name)

    def counted(*args: object) -> object:
        outcome = original(*args)
        calls.release()
        return outcome

    setattr(watchdog, name, counted)
    return calls


def test_a_busy_loop_that_keeps_answering_gets_no_warning(
    loop: asyncio.AbstractEventLoop, watch: LogWatch
) -> None:
    watchdog = Watchdog(threshold=THRESHOLD)
    start(watchdog, loop)
    beats = counting(watchdog, "_beat")
    done = threading.Event()

    async def busy() -> None:
        # Never waiting for I/O, never blocked for long: it is asked, and answers.
        while not done.is_set():
            time.sleep(0.002)  # noqa: ASYNC251 - the loop kept busy on purpose
            await asyncio.sleep(0)

    running = asyncio.run_coroutine_threadsafe(busy(), loop)
    try:
        for _ in range(5):
            assert beats.acquire(timeout=PATIENCE)
    finally:
        done.set()
        running.result(PATIENCE)
        watchdog.stop()
    assert watch.matching(is_warning) == []
    assert watchdog.statistics().episodes == 0


def test_an_idle_loop_is_looked_at_but_not_woken(
    loop: asyncio.AbstractEventLoop, watch: LogWatch
) -> None:
    watchdog = Watchdog(threshold=THRESHOLD)
    beats = counting(watchdog, "_beat")
    looks = counting(watchdog, "_tick")
    start(watchdog, loop)
    try:
        for _ in range(10):
            assert looks.acquire(timeout=PATIENCE)
    finally:
        watchdog.stop()
    # At most the first look, while `start` was still running on it, asked the loop.
    answered = 0
    while beats.acquire(blocking=False):
        answered += 1
    assert answered <= 1
    assert watch.matching(is_warning) == []


def test_the_watchdog_survives_its_own_failure_and_says_so(
    loop: asyncio.AbstractEventLoop, watch: LogWatch, monkeypatch: pytest.MonkeyPatch
) -> None:
    failures = 0
    tick = Watchdog._tick

    def failing_once(self: Watchdog, now: float) -> bool:
        nonlocal failures
        if failures == 0:
            failures += 1
            raise RuntimeError("boom")
        return tick(self, now)

    monkeypatch.setattr(Watchdog, "_tick", failing_once)
    watchdog = Watchdog(threshold=THRESHOLD)
    start(watchdog, loop)
    try:
        assert watch.wait_for(lambda r: "watchdog works again" in r.getMessage(), timeout=PATIENCE)
        # And it still does its job.
        assert on_the_loop(loop, lambda: block_until_warned(watch)) is True
    finally:
        watchdog.stop()
    (failure,) = watch.matching(lambda r: r.levelno == logging.ERROR)
    assert "watchdog failed; it carries on" in failure.getMessage()
    assert failure.exc_info is not None
    assert str(failure.exc_info[1]) == "boom"


def test_a_stack_that_cannot_be_read_still_gets_its_warning(
    loop: asyncio.AbstractEventLoop, watch: LogWatch, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unreadable(*args: object, **kwargs: object) -> None:
        raise ValueError("odd frame")

    monkeypatch.setattr("shepherd.watchdog.find_culprit", unreadable)
    watchdog = Watchdog(threshold=THRESHOLD)
    start(watchdog, loop)
    try:
        assert on_the_loop(loop, lambda: block_until_warned(watch)) is True
    finally:
        watchdog.stop()
    (warning,) = watch.matching(is_warning)
    assert "at an unknown place" in warning.getMessage()
    assert watch.matching(lambda r: "could not tell what blocks" in r.getMessage())


def test_the_thread_is_a_daemon_and_stop_ends_it(loop: asyncio.AbstractEventLoop) -> None:
    watchdog = Watchdog(threshold=THRESHOLD)
    start(watchdog, loop)
    (thread,) = [t for t in threading.enumerate() if t.name == "shepherd-watchdog"]
    assert thread.daemon
    assert watchdog.running

    watchdog.stop()

    assert not thread.is_alive()
    assert not watchdog.running


def test_starts_nest_on_one_loop_and_another_loop_is_refused(
    loop: asyncio.AbstractEventLoop,
) -> None:
    watchdog = Watchdog(threshold=THRESHOLD)
    start(watchdog, loop)
    start(watchdog, loop)
    watchdog.stop()
    assert watchdog.running  # one start left
    with pytest.raises(RuntimeError, match="another event loop"):
        asyncio.run(_start(watchdog))
    watchdog.stop()
    assert not watchdog.running


async def _start(watchdog: Watchdog) -> None:
    watchdog.start()


def test_the_threshold_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        Watchdog(threshold=0)
