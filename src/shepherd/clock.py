"""The clock every role reads time from, so that tests can move it."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Protocol, final

__all__ = ["Clock", "SystemClock"]


class Clock(Protocol):
    """A source of wall-clock instants and monotonic seconds.

    Instants (`now`) are what gets stored; local waits use `monotonic`, which a
    wall-clock jump does not move.
    """

    def now(self) -> datetime:
        """Return the current instant as an aware UTC datetime."""
        ...

    def monotonic(self) -> float:
        """Return seconds on a clock that never goes backwards."""
        ...


@final
class SystemClock:
    """The real clock: `datetime.now(UTC)` and `time.monotonic()`."""

    __slots__ = ()

    def now(self) -> datetime:
        """Return the current instant as an aware UTC datetime."""
        return datetime.now(UTC)

    def monotonic(self) -> float:
        """Return `time.monotonic()`."""
        return time.monotonic()
