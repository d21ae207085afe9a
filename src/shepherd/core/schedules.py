"""Schedules: which ticks are due, and which of them become tasks after an outage.

A schedule names a workflow and its ticks: a cron expression in a time zone,
or every N seconds (ticks at whole multiples of N seconds since the Unix
epoch, so every process computes the same ones). The supervisor's leader asks
`due_ticks` at each scan, with the instant of the last tick the schedule
fired (or the instant it was created or resumed) and the store's clock; it
creates one task per tick it returns, the tick's instant in the task's key
(`tick_key`), so that a tick fired twice (two leaders, a retry after a lost
reply) is one task.

A tick seen within `grace` seconds of its instant is on time, and always
fired. One older than that was missed (every process was stopped, or the
leadership was changing hands); the schedule's catch-up policy says what the
missed ticks become: `skip` fires none, `latest` the newest one, `all` each,
at most `max_catch_up` of them (the newest). Which ticks a cron expression
has is the shell's (a `Ticks` it passes in): this module is pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from shepherd.core.records import JsonValue

__all__ = [
    "MAX_CATCH_UP",
    "MAX_EVERY",
    "MAX_TICKS_PER_LOOK",
    "CatchUp",
    "EveryTicks",
    "Firing",
    "Schedule",
    "StoredSchedule",
    "Ticks",
    "check_catch_up",
    "check_every",
    "check_max_catch_up",
    "due_ticks",
    "tick_key",
]

#: The most missed ticks `catch_up="all"` may be allowed to fire at once.
MAX_CATCH_UP = 10_000
#: The longest `every`, in seconds: 100 years.
MAX_EVERY = 100 * 365.25 * 86400
#: The most on-time ticks one look fires; a schedule with more due goes on at the next look.
MAX_TICKS_PER_LOOK = 1000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class CatchUp(StrEnum):
    """What a schedule's missed ticks become (see the module's docstring)."""

    SKIP = "skip"
    LATEST = "latest"
    ALL = "all"


@dataclass(frozen=True, slots=True, kw_only=True)
class Schedule:
    """A schedule as declared (`app.schedule`) or as an operator set it.

    Exactly one of `cron` and `every` is given. `data` is each task's input.
    """

    name: str
    workflow: str
    cron: str | None = None
    every: float | None = None
    data: JsonValue = None
    timezone: str = "UTC"
    catch_up: CatchUp = CatchUp.SKIP
    max_catch_up: int = 10
    paused: bool = False

    @property
    def rule(self) -> str:
        """Its ticks in words: the cron expression and zone, or `every N s`."""
        if self.cron is not None:
            return f"{self.cron} ({self.timezone})"
        return f"every {self.every:g} s"


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredSchedule:
    """A schedule as the store holds it.

    Attributes:
        schedule: Its definition.
        created_at: When its row was written (the store's clock).
        since: The instant its ticks count from: the last tick fired, or when it
            was created or last resumed, whichever is latest.
        last_tick: The last tick it fired a task for, or None before its first.
    """

    schedule: Schedule
    created_at: datetime
    since: datetime
    last_tick: datetime | None


class Ticks(Protocol):
    """A schedule's ticks: the instants it fires at."""

    def after(self, at: datetime) -> datetime | None:
        """The first tick strictly after `at`, or None when there is none."""
        ...

    def before(self, at: datetime) -> datetime | None:
        """The last tick strictly before `at`, or None when there is none."""
        ...


@dataclass(frozen=True, slots=True)
class EveryTicks:
    """Ticks every `seconds`, at whole multiples of it since the Unix epoch (UTC)."""

    seconds: float

    def _at(self, n: int) -> datetime:
        return _EPOCH + timedelta(seconds=n * self.seconds)

    def after(self, at: datetime) -> datetime | None:
        n = math.floor((at - _EPOCH).total_seconds() / self.seconds)
        while self._at(n) <= at:  # float rounding: step until strictly after
            n += 1
        while n > 0 and self._at(n - 1) > at:
            n -= 1
        return self._at(n)

    def before(self, at: datetime) -> datetime | None:
        n = math.ceil((at - _EPOCH).total_seconds() / self.seconds)
        while self._at(n) >= at:
            n -= 1
        while self._at(n + 1) < at:
            n += 1
        return self._at(n)


@dataclass(frozen=True, slots=True)
class Firing:
    """What one look at a schedule does.

    Attributes:
        ticks: The ticks to fire a task for, oldest first.
        last: The tick to record as the last one looked at (the newest tick up to
            now, fired or skipped), or None when no tick has come since.
        missed: How many ticks were missed (fired by `latest`/`all` or skipped),
            counted up to MAX_TICKS_PER_LOOK or `max_catch_up`, whichever is more.
    """

    ticks: tuple[datetime, ...]
    last: datetime | None
    missed: int


def due_ticks(
    ticks: Ticks,
    *,
    since: datetime,
    now: datetime,
    catch_up: CatchUp,
    max_catch_up: int,
    grace: float,
) -> Firing:
    """Which ticks in (`since`, `now`] to fire, by the catch-up policy (module docstring).

    Args:
        ticks: The schedule's ticks.
        since: The last tick fired, or the instant its ticks count from.
        now: The store's clock.
        catch_up: The policy for missed ticks.
        max_catch_up: The most missed ticks `all` fires (the newest of them).
        grace: Seconds after its instant within which a tick is on time.
    """
    late = now - timedelta(seconds=grace)
    on_time: list[datetime] = []
    t = ticks.after(max(since, late))
    while t is not None and t <= now and len(on_time) < MAX_TICKS_PER_LOOK:
        on_time.append(t)
        t = ticks.after(t)
    missed: list[datetime] = []
    if since < late:
        # `skip` fires none, but finds the newest to count the missed ticks from.
        wanted = {CatchUp.SKIP: 1, CatchUp.LATEST: 1, CatchUp.ALL: max_catch_up}[catch_up]
        t = ticks.before(late + timedelta(microseconds=1))  # a tick exactly at `late` is missed
        while t is not None and t > since and len(missed) < wanted:
            missed.append(t)
            t = ticks.before(t)
        missed.reverse()
    count = _count_missed(ticks, since, missed, most=max(max_catch_up, MAX_TICKS_PER_LOOK))
    fired = tuple(on_time) if catch_up is CatchUp.SKIP else (*missed, *on_time)
    newest = on_time[-1] if on_time else (missed[-1] if missed else None)
    return Firing(ticks=fired, last=newest, missed=count)


def _count_missed(ticks: Ticks, since: datetime, found: list[datetime], *, most: int) -> int:
    """How many ticks lie after `since` up to the newest of `found`, counted up to `most`."""
    if not found:
        return 0
    count = len(found)
    t = ticks.before(found[0])
    while t is not None and t > since and count < most:
        count += 1
        t = ticks.before(t)
    return count


def tick_key(name: str, tick: datetime) -> str:
    """The key of the task a schedule fires for `tick`: one per schedule and tick."""
    return f"schedule:{name}@{tick.astimezone(UTC).isoformat()}"


def check_every(every: object) -> str | None:
    """Why `every` is not a tick period (a positive, finite number of seconds); None if it is."""
    if isinstance(every, bool) or not isinstance(every, (int, float)):
        return f"every must be a number of seconds, not {type(every).__name__}"
    try:
        seconds = float(every)
    except OverflowError:
        return f"every must be at most {MAX_EVERY:g} seconds"
    if math.isnan(seconds) or math.isinf(seconds):
        return f"every must be a finite number of seconds, not {seconds}"
    if seconds <= 0:
        return f"every must be more than 0 seconds, not {every}"
    if seconds > MAX_EVERY:
        return f"every must be at most {MAX_EVERY:g} seconds, not {every}"
    return None


def check_catch_up(catch_up: object) -> str | None:
    """Why `catch_up` is not a catch-up policy; None if it is."""
    if isinstance(catch_up, str) and catch_up in CatchUp._value2member_map_:
        return None
    allowed = ", ".join(repr(str(c)) for c in CatchUp)
    return f"catch_up must be one of {allowed}, not {catch_up!r}"


def check_max_catch_up(value: object) -> str | None:
    """Why `value` is not a cap on missed ticks (a whole number 1..MAX_CATCH_UP); None if it is."""
    if isinstance(value, bool) or not isinstance(value, int):
        return f"max_catch_up must be a whole number, not {value!r}"
    if not 1 <= value <= MAX_CATCH_UP:
        return f"max_catch_up must be from 1 to {MAX_CATCH_UP}, not {value}"
    return None
