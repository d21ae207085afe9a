"""Schedules checked before anything is stored, and their ticks from a cron expression.

Cron expressions are parsed and stepped by `cronsim` (see docs/design.md for
why), in the schedule's time zone (`zoneinfo`): a daily 02:30 in a zone that
skips 02:00-03:00 once a year fires at 03:00 that day, and in the night that
repeats 02:00-03:00 it fires once, at the first 02:30.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from shepherd.core.resources import check_name
from shepherd.core.schedules import (
    CatchUp,
    EveryTicks,
    Schedule,
    Ticks,
    check_catch_up,
    check_every,
    check_max_catch_up,
)
from shepherd.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

__all__ = [
    "CronTicks",
    "checked_schedule",
    "checked_schedule_name",
    "schedule_exists",
    "ticks_of",
    "unknown_schedule",
]


def unknown_schedule(name: str) -> ConfigError:
    """The error for a schedule the store does not hold (field `name`)."""
    return ConfigError("name", f"unknown schedule {name!r}: add it first (shepherd schedules add)")


def schedule_exists(name: str) -> ConfigError:
    """The error for adding a schedule whose name is taken (field `name`)."""
    return ConfigError(
        "name", f"schedule {name!r} exists already (change it with shepherd schedules set)"
    )


def checked_schedule_name(name: object) -> str:
    """`name` if it can name a schedule. Raises ConfigError (field `name`) if not."""
    problem = check_name("schedule", name)
    if problem is not None:
        raise ConfigError("name", problem)
    assert isinstance(name, str)
    return name


def checked_schedule(schedule: Schedule) -> Schedule:
    """`schedule`, its values checked (and `catch_up` as a `CatchUp`).

    Raises:
        ConfigError: A value is wrong; its field is the one, and its message
            names the schedule and what is wrong: a name or workflow that is
            not a name, `cron` and `every` both or neither, a cron expression
            that does not parse, an unknown time zone, `every` not a positive
            finite number of seconds, a bad `catch_up` or `max_catch_up`.
    """
    name = checked_schedule_name(schedule.name)

    def refuse(field: str, problem: str) -> ConfigError:
        return ConfigError(field, f"schedule {name!r}: {problem}")

    if (problem := check_name("workflow", schedule.workflow)) is not None:
        raise refuse("workflow", problem)
    if (schedule.cron is None) == (schedule.every is None):
        raise refuse("cron", "give exactly one of cron and every")
    zone = _zone(schedule.timezone, refuse)
    if schedule.cron is not None:
        if not isinstance(schedule.cron, str):
            raise refuse("cron", f"cron must be a str, not {type(schedule.cron).__name__}")
        try:
            CronSim(schedule.cron, datetime(2000, 1, 1, tzinfo=zone))
        except (CronSimError, ValueError) as exc:
            raise refuse("cron", f"{schedule.cron!r} is not a cron expression: {exc}") from None
    elif (problem := check_every(schedule.every)) is not None:
        raise refuse("every", problem)
    if (problem := check_catch_up(schedule.catch_up)) is not None:
        raise refuse("catch_up", problem)
    if (problem := check_max_catch_up(schedule.max_catch_up)) is not None:
        raise refuse("max_catch_up", problem)
    if not isinstance(schedule.paused, bool):
        raise refuse("paused", f"paused must be True or False, not {schedule.paused!r}")
    every = None if schedule.every is None else float(schedule.every)
    return replace(schedule, every=every, catch_up=CatchUp(schedule.catch_up))


def _zone(timezone: object, refuse: Callable[[str, str], ConfigError]) -> ZoneInfo:
    """The zone named `timezone`; `refuse("timezone", problem)` raised when there is none."""
    if not isinstance(timezone, str) or not timezone:
        raise refuse("timezone", f"timezone must be a zone name, not {timezone!r}")
    try:
        return ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise refuse(
            "timezone", f"unknown timezone {timezone!r} (an IANA name, such as 'Europe/Berlin')"
        ) from None


@dataclass(frozen=True, slots=True)
class CronTicks:
    """The ticks of a cron expression in a time zone (a `core.schedules.Ticks`)."""

    expression: str
    zone: ZoneInfo

    def _first(self, at: datetime, *, reverse: bool) -> datetime | None:
        walk: Iterator[datetime] = CronSim(
            self.expression, at.astimezone(self.zone).replace(microsecond=0), reverse=reverse
        )
        start = at.astimezone(UTC)
        for tick in walk:
            tick = tick.astimezone(UTC)
            if (tick > start) if not reverse else (tick < start):
                return tick
        return None

    def after(self, at: datetime) -> datetime | None:
        return self._first(at, reverse=False)

    def before(self, at: datetime) -> datetime | None:
        # CronSim starts from whole seconds: from the next one, when `at` has a fraction.
        whole = at.replace(microsecond=0)
        return self._first(whole + timedelta(seconds=1) if whole != at else at, reverse=True)


def ticks_of(schedule: Schedule) -> Ticks:
    """The ticks of a checked `schedule`."""
    if schedule.cron is not None:
        return CronTicks(schedule.cron, ZoneInfo(schedule.timezone))
    assert schedule.every is not None
    return EveryTicks(schedule.every)
