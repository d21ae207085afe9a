"""The clock every role reads time from and waits on, so that tests can move it.

Instants (`now`) are what gets stored; local waits run on `monotonic` seconds,
which a wall-clock jump does not move. A deadline given as an instant (a
step's `complete_by`) is turned into monotonic seconds once, when its scope
is made, and from then on only monotonic time moves it. `SystemClock` waits on
the event loop; `shepherd.testing.FakeClock` wakes its sleepers and fires its
deadlines when a test moves it.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol, final

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType

__all__ = ["Clock", "Deadline", "Stopwatch", "SystemClock", "Timer", "sleep_on", "wait_event_on"]


class Timer(Protocol):
    """A callback scheduled by `Clock.call_later`."""

    def cancel(self) -> None:
        """Do not run the callback (nothing happens if it already ran)."""
        ...


class Clock(Protocol):
    """A source of wall-clock instants and monotonic seconds, and the waits on them.

    Instants (`now`) are what gets stored; local waits use `monotonic`, which a
    wall-clock jump does not move.
    """

    def now(self) -> datetime:
        """Return the current instant as an aware UTC datetime."""
        ...

    def monotonic(self) -> float:
        """Return seconds on a clock that never goes backwards."""
        ...

    def call_later(self, delay: float, callback: Callable[[], object]) -> Timer:
        """Run `callback` on the event loop once `delay` monotonic seconds have passed."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Return once `seconds` monotonic seconds have passed."""
        ...

    def deadline(self, at: datetime, *, now: datetime | None = None) -> Deadline:
        """A scope whose body is cancelled at instant `at` (see `Deadline`).

        Args:
            at: The instant, on the same clock as `now`.
            now: The current instant that `at` is read against (default: this
                clock's); pass the store's `now()` for a deadline the store set.
        """
        ...

    async def wait_event(self, event: asyncio.Event, seconds: float) -> bool:
        """Wait for `event` at most `seconds`; return whether it is set.

        A cancellation of the caller arriving as the event is set is never
        swallowed (unlike `asyncio.wait_for` on Python 3.11).
        """
        ...


class _State(enum.Enum):
    CREATED = "created"
    ENTERED = "entered"
    EXPIRING = "expiring"
    EXPIRED = "expired"
    EXITED = "exited"


@final
class Deadline:
    """A scope whose body is cancelled when its time comes on a clock.

    Made by `Clock.deadline` and used as `async with clock.deadline(at) as scope:`.
    It behaves like `asyncio.timeout_at`, on the clock's time instead of the event
    loop's: at its time the task running the body is cancelled, and that
    cancellation leaves the scope as `TimeoutError`; `expired()` tells it from
    any other cancellation or TimeoutError.

    Args:
        clock: Whose `monotonic` seconds and timers the deadline runs on.
        seconds: How long from now (monotonic) the body may run; at most 0
            cancels it at its first await.
    """

    __slots__ = ("_cancelling", "_clock", "_state", "_target", "_task", "_timer")

    def __init__(self, clock: Clock, seconds: float) -> None:
        self._clock = clock
        self._target = clock.monotonic() + seconds
        self._state = _State.CREATED
        self._task: asyncio.Task[object] | None = None
        self._cancelling = 0
        self._timer: Timer | None = None

    def expired(self) -> bool:
        """Whether the deadline passed and cancelled the body."""
        return self._state in (_State.EXPIRING, _State.EXPIRED)

    def remaining(self) -> float:
        """Monotonic seconds left until the deadline (negative once it passed)."""
        return self._target - self._clock.monotonic()

    def reschedule(self, at: datetime, *, now: datetime | None = None) -> None:
        """Move the deadline to instant `at` (read against `now`, as `Clock.deadline` does).

        Raises:
            RuntimeError: The deadline already expired, or its scope was left.
        """
        if self._state not in (_State.CREATED, _State.ENTERED):
            raise RuntimeError(f"cannot move a deadline that is {self._state.value}")
        reference = self._clock.now() if now is None else now
        self._target = self._clock.monotonic() + (at - reference).total_seconds()
        if self._state is _State.ENTERED:
            self._arm()

    async def __aenter__(self) -> Deadline:
        if self._state is not _State.CREATED:
            raise RuntimeError("a deadline scope can be entered only once")
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a deadline scope must be used inside a task")
        self._task = task
        self._cancelling = task.cancelling()
        self._state = _State.ENTERED
        self._arm()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._state is _State.EXPIRING:
            self._state = _State.EXPIRED
            task = self._task
            # Our cancel, and no other one since we entered: it becomes TimeoutError.
            if (
                task is not None
                and task.uncancel() <= self._cancelling
                and exc_type is asyncio.CancelledError
            ):
                raise TimeoutError from exc
        elif self._state is _State.ENTERED:
            self._state = _State.EXITED

    def _arm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._clock.call_later(self.remaining(), self._expire)

    def _expire(self) -> None:
        self._timer = None
        if self._state is _State.ENTERED and self._task is not None:
            self._task.cancel()
            self._state = _State.EXPIRING


async def sleep_on(clock: Clock, seconds: float) -> None:
    """`clock.sleep(seconds)` written over `clock.call_later`, for clocks that keep their own timers."""
    woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def wake() -> None:
        if not woken.done():
            woken.set_result(None)

    timer = clock.call_later(seconds, wake)
    try:
        await woken
    finally:
        timer.cancel()


async def wait_event_on(clock: Clock, event: asyncio.Event, seconds: float) -> bool:
    """`clock.wait_event(event, seconds)` written over a `Deadline` on `clock`."""
    if event.is_set():
        return True
    with contextlib.suppress(TimeoutError):
        async with Deadline(clock, seconds):
            await event.wait()
    return event.is_set()


@final
class SystemClock:
    """The real clock: `datetime.now(UTC)`, `time.monotonic()`, and the event loop's timers."""

    __slots__ = ()

    def now(self) -> datetime:
        """Return the current instant as an aware UTC datetime."""
        return datetime.now(UTC)

    def monotonic(self) -> float:
        """Return `time.monotonic()`."""
        return time.monotonic()

    def call_later(self, delay: float, callback: Callable[[], object]) -> Timer:
        """`loop.call_later(delay, callback)` on the running event loop."""
        return asyncio.get_running_loop().call_later(delay, callback)

    async def sleep(self, seconds: float) -> None:
        """`asyncio.sleep(seconds)`."""
        await asyncio.sleep(seconds)

    def deadline(self, at: datetime, *, now: datetime | None = None) -> Deadline:
        """A scope whose body is cancelled at instant `at` (see `Clock.deadline`)."""
        return Deadline(self, (at - (self.now() if now is None else now)).total_seconds())

    async def wait_event(self, event: asyncio.Event, seconds: float) -> bool:
        """Wait for `event` at most `seconds`; return whether it is set."""
        return await wait_event_on(self, event, seconds)


@final
class Stopwatch:
    """Seconds since a mark, on the app's clock and on the event loop's own: the lesser.

    A process held back (stopped, its event loop blocked, its writes waiting on
    a lock or a stalled path) is held back in real time, and on its app's clock
    too. A `FakeClock` moved on while the loop merely waited for I/O is no hold
    up: on the loop's clock little time passed.

    Args:
        clock: The app's clock.
    """

    __slots__ = ("_at", "clock")

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._at: tuple[float, float] | None = None

    def mark(self) -> None:
        """Start counting from now."""
        self._at = (self.clock.monotonic(), asyncio.get_running_loop().time())

    def since(self) -> float | None:
        """Seconds since the mark (the lesser of the two clocks'), or None before any mark."""
        if self._at is None:
            return None
        app, loop = self._at
        return min(self.clock.monotonic() - app, asyncio.get_running_loop().time() - loop)
