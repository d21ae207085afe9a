"""Reminders of exclusive owners: when a reminder is first due, and what each firing queues.

A reminder (`app.remind`) is a named timer on one key of an exclusive agent.
The leading supervisor fires it: each due tick becomes one call to the key's
owner, queued with the key's other calls, in the transaction that moves the
reminder to its next tick. This module checks a reminder's timing before
anything is stored (`checked_timing`), decides what one firing queues
(`fire`), and names a tick's call (`tick_call_id`): a hash of the reminder,
its generation (bumped by every replace) and the tick, unique among the
store's calls, so that one tick never becomes two calls, whoever fires it.

A periodic reminder's ticks lie on its grid (`first`, `first + every`, ...).
A firing queues the latest tick due and moves to the first tick after now:
ticks missed while no supervisor led (or while the key's previous reminder
call still waited) are skipped, not queued one after another. Pure: no I/O,
no clock (instants are passed in).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from shepherd.core.limits import too_long
from shepherd.core.timing import MAX_SECONDS, checked_delay, checked_not_before

__all__ = [
    "REMINDER_NAME_BYTES",
    "Firing",
    "Reminder",
    "ReminderTiming",
    "checked_name",
    "checked_timing",
    "fire",
    "tick_call_id",
]

#: The longest reminder name, in bytes of UTF-8: (agent, key, name) is the store's index row.
REMINDER_NAME_BYTES = 200


@dataclass(frozen=True, slots=True, kw_only=True)
class ReminderTiming:
    """When a reminder is first due and how often it repeats, as checked.

    Exactly one of `delay` (seconds from the store's now) and `at` (an aware
    instant, in UTC) is set; `every` is None for a reminder that fires once.
    """

    delay: float | None = None
    at: datetime | None = None
    every: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Reminder:
    """A reminder as the store keeps it."""

    agent: str
    key: str
    name: str
    payload: object
    #: Its next tick.
    next_at: datetime
    #: Seconds between ticks; None: it fires once.
    every: float | None
    #: Bumped by every replace (`app.remind` of the same name).
    generation: int
    #: When it last fired, or None.
    fired_at: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Firing:
    """What firing a due reminder does: the tick its call stands for, and its next tick.

    `next_at` None: the reminder fired for the last time and is deleted.
    """

    tick: datetime
    next_at: datetime | None


def checked_name(name: object) -> str:
    """A reminder's name: a non-empty str of at most REMINDER_NAME_BYTES.

    Raises:
        ValueError: It is not; the message says why.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"the reminder's name must be a non-empty str, not {name!r}")
    problem = too_long("the reminder's name", name, REMINDER_NAME_BYTES)
    if problem is not None:
        raise ValueError(problem)
    return name


def checked_timing(
    *, delay: object = None, at: object = None, every: object = None
) -> ReminderTiming:
    """A reminder's `delay` or `at`, and `every`, checked.

    Neither `delay` nor `at`: due after one period (`every`), or now for a
    reminder that fires once. `every` is seconds > 0, finite, at most 100 years.

    Raises:
        ValueError: Both `delay` and `at`, or a value refused; the message names it.
    """
    if delay is not None and at is not None:
        raise ValueError("give delay (seconds from now) or at (an instant), not both")
    period = None if every is None else _period(every)
    if at is not None:
        try:
            instant = checked_not_before(at)
        except ValueError as exc:
            raise ValueError(str(exc).replace("not_before", "at", 1)) from None
        return ReminderTiming(at=instant, every=period)
    if delay is None:
        return ReminderTiming(delay=period or 0.0, every=period)
    return ReminderTiming(delay=checked_delay(delay), every=period)


def _period(every: object) -> float:
    """`every` as seconds > 0, finite, at most MAX_SECONDS.

    Raises:
        ValueError: It is not; the message says why.
    """
    if isinstance(every, bool) or not isinstance(every, (int, float)):
        raise ValueError(f"every must be a number of seconds, not {type(every).__name__}")
    try:
        period = float(every)
    except OverflowError:  # an int too large for a float
        period = math.inf
    if math.isnan(period) or math.isinf(period):
        raise ValueError(f"every must be a finite number of seconds, not {every!r}")
    if period <= 0 or period > MAX_SECONDS:
        raise ValueError(f"every must be > 0 and at most {MAX_SECONDS:g} seconds, not {every!r}")
    return period


def fire(reminder: Reminder, *, now: datetime) -> Firing | None:
    """What firing `reminder` does at `now`; None if it is not due yet.

    The tick is the latest of its grid at or before `now` (its `next_at` for
    one that fires once); the next tick is the first after `now`.
    """
    if reminder.next_at > now:
        return None
    if reminder.every is None:
        return Firing(tick=reminder.next_at, next_at=None)
    passed = (now - reminder.next_at).total_seconds()
    periods = math.floor(passed / reminder.every)
    tick = reminder.next_at + timedelta(seconds=periods * reminder.every)
    if tick > now:  # rounding
        tick -= timedelta(seconds=reminder.every)
    following = tick + timedelta(seconds=reminder.every)
    while following <= now:  # rounding the other way
        tick, following = following, following + timedelta(seconds=reminder.every)
    return Firing(tick=tick, next_at=following)


def tick_call_id(agent: str, key: str, name: str, generation: int, tick: datetime) -> str:
    """The call id of one tick of a reminder: the same whoever fires it, and however often."""
    at = tick.astimezone(UTC).isoformat(timespec="microseconds")
    text = "\x00".join((agent, key, name, str(generation), at))
    return "r" + hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
