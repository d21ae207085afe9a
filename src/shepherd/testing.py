"""Helpers for testing code built on shepherd: a clock you move, and polling with a deadline."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import final

__all__ = ["FakeClock", "wait_until"]

_DEFAULT_START = datetime(2030, 1, 1, tzinfo=UTC)


@final
class FakeClock:
    """A clock that moves only when told to (a `shepherd.clock.Clock`).

    Args:
        start: The first instant `now()` returns; an aware datetime. Defaults to
            2030-01-01T00:00:00Z.
        monotonic_start: The first value `monotonic()` returns.

    Raises:
        ValueError: `start` is a naive datetime.
    """

    __slots__ = ("_monotonic", "_now")

    def __init__(self, start: datetime | None = None, *, monotonic_start: float = 0.0) -> None:
        start = _DEFAULT_START if start is None else start
        if start.tzinfo is None or start.utcoffset() is None:
            raise ValueError("FakeClock start must be an aware datetime")
        self._now = start.astimezone(UTC)
        self._monotonic = monotonic_start

    def now(self) -> datetime:
        """Return the current fake instant, an aware UTC datetime."""
        return self._now

    def monotonic(self) -> float:
        """Return the current fake monotonic seconds."""
        return self._monotonic

    def advance(self, seconds: float | timedelta) -> None:
        """Move both clocks forward.

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
