"""Helpers for testing code built on shepherd: a clock you move, and polling with a deadline.

Pass a `FakeClock` to `App(clock=...)`: the store reads its time from it, and
every role's deadline, retry backoff, poll and interval waits on it, so a test
moves time instead of waiting for it (`advance`, or `advance_until` while real
I/O runs between the wake-ups).
"""

from __future__ import annotations

import asyncio
import heapq
import inspect
import itertools
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, final

from shepherd.clock import Deadline, sleep_on, wait_event_on

if TYPE_CHECKING:
    from shepherd.clock import Timer

__all__ = ["FakeClock", "advance_until", "wait_until"]

_DEFAULT_START = datetime(2030, 1, 1, tzinfo=UTC)
#: Pending timers a FakeClock holds before it first sweeps out the cancelled ones.
_PURGE_AT = 256


@final
class _FakeTimer:
    """A callback waiting on a `FakeClock` for its monotonic second `when`."""

    __slots__ = ("callback", "cancelled", "loop", "when")

    def __init__(
        self, when: float, callback: Callable[[], object], loop: asyncio.AbstractEventLoop
    ) -> None:
        self.when = when
        self.callback = callback
        self.loop = loop
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True

    def run(self) -> None:
        if self.cancelled:
            return
        self.cancelled = True  # once
        try:
            self.callback()
        except Exception as exc:  # a timer's failure is the loop's to report, as with call_later
            self.loop.call_exception_handler(
                {"message": "FakeClock timer callback failed", "exception": exc}
            )


@final
class FakeClock:
    """A clock that moves only when told to (a `shepherd.clock.Clock`).

    Its sleeps, deadlines and timed waits end only when the clock is moved
    (`advance`, `set`) to or past their time: each wake-up due then happens at
    once, soonest first (in the order they were made, for equal times), and the
    tasks it wakes run as soon as the mover yields to the event loop. A waiter
    that then waits again counts from the clock's new time. Use it from the
    event loop's thread.

    Args:
        start: The first instant `now()` returns; an aware datetime. Defaults to
            2030-01-01T00:00:00Z.
        monotonic_start: The first value `monotonic()` returns.

    Raises:
        ValueError: `start` is a naive datetime.
    """

    __slots__ = ("_made", "_monotonic", "_now", "_purge_at", "_timers")

    def __init__(self, start: datetime | None = None, *, monotonic_start: float = 0.0) -> None:
        start = _DEFAULT_START if start is None else start
        if start.tzinfo is None or start.utcoffset() is None:
            raise ValueError("FakeClock start must be an aware datetime")
        self._now = start.astimezone(UTC)
        self._monotonic = monotonic_start
        #: Pending wake-ups: (monotonic second, order made, timer), a heap.
        self._timers: list[tuple[float, int, _FakeTimer]] = []
        self._made = itertools.count()
        #: The heap's size at which cancelled timers are swept out.
        self._purge_at = _PURGE_AT

    def now(self) -> datetime:
        """Return the current fake instant, an aware UTC datetime."""
        return self._now

    def monotonic(self) -> float:
        """Return the current fake monotonic seconds."""
        return self._monotonic

    def call_later(self, delay: float, callback: Callable[[], object]) -> Timer:
        """Run `callback` once the clock has been moved `delay` seconds on.

        A `delay` of 0 or less runs it at the event loop's next turn, as
        `loop.call_later` would.

        Raises:
            RuntimeError: No event loop runs in this thread.
        """
        loop = asyncio.get_running_loop()
        timer = _FakeTimer(self._monotonic + max(0.0, delay), callback, loop)
        if delay <= 0:
            loop.call_soon(timer.run)
            return timer
        if len(self._timers) >= self._purge_at:
            # Timed waits that ended early leave cancelled timers: sweep them now and then.
            self._timers = [entry for entry in self._timers if not entry[2].cancelled]
            heapq.heapify(self._timers)
            self._purge_at = max(_PURGE_AT, 2 * len(self._timers))
        heapq.heappush(self._timers, (timer.when, next(self._made), timer))
        return timer

    async def sleep(self, seconds: float) -> None:
        """Return once the clock has been moved `seconds` on."""
        await sleep_on(self, seconds)

    def deadline(self, at: datetime, *, now: datetime | None = None) -> Deadline:
        """A scope whose body is cancelled once the clock reaches `at` (see `Clock.deadline`)."""
        return Deadline(self, (at - (self._now if now is None else now)).total_seconds())

    async def wait_event(self, event: asyncio.Event, seconds: float) -> bool:
        """Wait for `event` until the clock has been moved `seconds` on; return whether it is set."""
        return await wait_event_on(self, event, seconds)

    def advance(self, seconds: float | timedelta) -> None:
        """Move both clocks forward, and wake every sleeper and deadline now due.

        Args:
            seconds: How far, in seconds or as a timedelta; not negative.

        Raises:
            ValueError: `seconds` is negative.
        """
        delta = seconds.total_seconds() if isinstance(seconds, timedelta) else float(seconds)
        if delta < 0:
            raise ValueError(f"cannot move a clock backwards ({delta} s)")
        self._now += timedelta(seconds=delta)
        self._monotonic += delta
        timers = self._timers
        while timers and timers[0][0] <= self._monotonic:
            _, _, timer = heapq.heappop(timers)
            if not timer.cancelled and not timer.loop.is_closed():
                timer.run()

    def set(self, instant: datetime) -> None:
        """Move both clocks forward to the aware `instant` (as `advance` does).

        Raises:
            ValueError: `instant` is naive, or earlier than `now()`.
        """
        if instant.tzinfo is None or instant.utcoffset() is None:
            raise ValueError("FakeClock.set needs an aware datetime")
        self.advance(instant - self._now)

    def wakeups(self) -> list[float]:
        """Seconds from now to each pending sleep, deadline and timed wait, soonest first."""
        return sorted(
            when - self._monotonic for when, _, timer in self._timers if not timer.cancelled
        )


async def wait_until(
    predicate: Callable[[], Awaitable[bool] | bool],
    *,
    timeout: float = 10.0,  # noqa: ASYNC109 - a deadline for polling, not for one awaited call
    interval: float = 0.01,
    message: str = "",
) -> None:
    """Poll `predicate` until it is true, or fail once `timeout` has passed.

    The house alternative to sleeping in tests: it returns as soon as the
    condition holds, and a condition that never holds fails with a message.

    Args:
        predicate: A function returning a bool, or an awaitable of one.
        timeout: Seconds (of the event loop's monotonic clock) before giving up.
        interval: Seconds between polls.
        message: The AssertionError's message on timeout.

    Raises:
        AssertionError: The predicate was still false after `timeout` seconds.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        outcome = predicate()
        if inspect.isawaitable(outcome):
            outcome = await outcome
        if outcome:
            return
        if loop.time() >= deadline:
            raise AssertionError(message or f"condition not met within {timeout} s")
        await asyncio.sleep(interval)


#: The least fake time one move of `advance_until` goes on, in seconds.
MIN_MOVE = 1e-6


async def advance_until(
    clock: FakeClock,
    predicate: Callable[[], Awaitable[bool] | bool],
    *,
    step: float,
    timeout: float = 10.0,  # noqa: ASYNC109 - a deadline for polling, not for one awaited call
    interval: float = 0.01,
    message: str = "",
    before_move: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Move `clock` on, one wake-up at a time, until `predicate` is true.

    For code that waits on a FakeClock but does real I/O (a store): between two
    moves the event loop runs for `interval` real seconds, so that what the
    last move woke can do its I/O and wait again. Each move goes to the
    clock's next pending wake-up, or `step` seconds on if that is sooner (or
    nothing waits), and at least `MIN_MOVE` (a microsecond): no sleep or
    deadline is ever jumped over by more than that, and a wake-up whose time
    rounds to the clock's own cannot hold it still.

    Args:
        clock: The clock to move.
        predicate: A function returning a bool, or an awaitable of one.
        step: The most fake seconds one move goes on.
        timeout: Real seconds (of the event loop's clock) before giving up.
        interval: Real seconds between moves.
        message: The AssertionError's message on timeout.
        before_move: Awaited before each move (say, until no store call of the
            code under test is under way, so that no write sees the clock jump).

    Raises:
        AssertionError: The predicate was still false after `timeout` real seconds.
        ValueError: `step` is not positive.
    """
    if step <= 0:
        raise ValueError(f"step must be positive, not {step}")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        outcome = predicate()
        if inspect.isawaitable(outcome):
            outcome = await outcome
        if outcome:
            return
        if loop.time() >= deadline:
            raise AssertionError(
                message or f"condition not met within {timeout} s (fake clock at {clock.now()})"
            )
        if before_move is not None:
            await before_move()
        pending = clock.wakeups()
        # At least MIN_MOVE: a wake-up due "now" again at every look would hold
        # the clock still (a sleep of `period - (now - at)` whose remainder is
        # too small for `now + remainder` to differ from `now` in floating point).
        clock.advance(max(min(step, pending[0]) if pending else step, MIN_MOVE))
        await asyncio.sleep(interval)
