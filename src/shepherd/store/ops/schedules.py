"""Schedules: declared, added, changed by an operator, listed, and advanced by the leader.

Every schedule given to a method is checked first (`store.schedule_rows`): a
bad value raises `ConfigError` naming it, and nothing is written. The tasks a
schedule fires are ordinary submits (`Tasks.submit_tasks`) whose key holds
the tick (`core.schedules.tick_key`); `AdvanceSchedule` then records the
tick, so a leader that dies between the two fires the same keys again, which
create nothing.
"""

from __future__ import annotations

from datetime import datetime

from shepherd.core.schedules import Schedule, StoredSchedule
from shepherd.store.ops.base import Read, Runs, Write, method, operation
from shepherd.store.schedule_rows import checked_schedule, checked_schedule_name

__all__ = [
    "AddSchedule",
    "AdvanceSchedule",
    "DeclareSchedule",
    "ListSchedules",
    "ReplaceSchedule",
    "Schedules",
]


@operation
class DeclareSchedule(Write[bool]):
    """Insert `schedule` if none has its name; never overwrite. Whether it did.

    Its ticks count from the insert's instant (the store's clock).
    """

    schedule: Schedule


@operation
class AddSchedule(Write[StoredSchedule]):
    """Insert `schedule`; the row. Raises ConfigError (field `name`) if its name is taken."""

    schedule: Schedule


@operation
class ReplaceSchedule(Write[StoredSchedule]):
    """Replace the definition of the schedule of `schedule.name`, keeping its ticks; the row.

    A schedule resumed (paused before, not now) counts its ticks from now:
    the ticks of its pause are not caught up. Raises ConfigError (field `name`) for an unknown name.
    """

    schedule: Schedule


@operation
class ListSchedules(Read[list[StoredSchedule]]):
    """Every schedule, by name."""


@operation
class AdvanceSchedule(Write[bool]):
    """Record `tick` as the last tick `name` looked at, if it is later than the one recorded.

    Whether it moved (False for an unknown schedule or an older tick).
    """

    name: str
    tick: datetime


class Schedules(Runs):
    """The store's methods for schedules."""

    list_schedules = method(ListSchedules)
    advance_schedule = method(AdvanceSchedule)

    async def declare_schedule(self, schedule: Schedule) -> bool:
        """`DeclareSchedule`, `schedule` checked first."""
        return await self.write(DeclareSchedule(checked_schedule(schedule)))

    async def add_schedule(self, schedule: Schedule) -> StoredSchedule:
        """`AddSchedule`, `schedule` checked first."""
        return await self.write(AddSchedule(checked_schedule(schedule)))

    async def replace_schedule(self, schedule: Schedule) -> StoredSchedule:
        """`ReplaceSchedule`, `schedule` checked first."""
        return await self.write(ReplaceSchedule(checked_schedule(schedule)))

    async def get_schedule(self, name: str) -> StoredSchedule | None:
        """The schedule named `name`, or None (`name` checked first)."""
        name = checked_schedule_name(name)
        return next((s for s in await self.list_schedules() if s.schedule.name == name), None)
