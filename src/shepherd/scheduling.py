"""The operator's side of schedules: list them with their next tick, add, change, pause, trigger.

`app.operations.schedules` is this (the CLI's `shepherd schedules`). Each
method opens the store on first use; every change is checked before anything
is written (a `ConfigError` names the field: `name` for an unknown name or
one taken). A trigger submits one task now, keyed by the schedule and the
instant of the trigger, outside the schedule's ticks.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, final

from shepherd.core.schedules import Schedule, StoredSchedule
from shepherd.errors import ConfigError
from shepherd.store.ops.tasks import NewTask
from shepherd.store.schedule_rows import (
    checked_schedule,
    checked_schedule_name,
    ticks_of,
    unknown_schedule,
)

if TYPE_CHECKING:
    from datetime import datetime

    from shepherd.store.contract import Store

__all__ = ["ScheduleOperations", "ScheduleView"]


@dataclass(frozen=True, slots=True)
class ScheduleView:
    """A stored schedule with its next tick (None while paused)."""

    stored: StoredSchedule
    next_tick: datetime | None

    @property
    def schedule(self) -> Schedule:
        """Its definition."""
        return self.stored.schedule

    def to_json(self) -> dict[str, Any]:
        """As `shepherd schedules --json` prints it."""
        s = self.schedule
        return {
            "name": s.name,
            "workflow": s.workflow,
            "cron": s.cron,
            "every": s.every,
            "timezone": s.timezone,
            "data": s.data,
            "catch_up": str(s.catch_up),
            "max_catch_up": s.max_catch_up,
            "paused": s.paused,
            "last_tick": _iso(self.stored.last_tick),
            "next_tick": _iso(self.next_tick),
        }


def _iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()


@final
class ScheduleOperations:
    """Schedules as an operator reads and changes them, over an App's store.

    Args:
        store: The App's store (opened by `open_`).
        open_: Opens it (idempotent).
        workflows: The workflows the App registers: a schedule added or changed
            must name one of them when there are any (a store-only CLI knows none).
    """

    def __init__(
        self,
        store: Callable[[], Store],
        open_: Callable[[], Awaitable[object]],
        workflows: Mapping[str, object],
    ) -> None:
        self._store = store
        self._open = open_
        self._workflows = workflows

    async def _opened(self) -> Store:
        await self._open()
        return self._store()

    def _check_workflow(self, schedule: Schedule) -> None:
        if self._workflows and schedule.workflow not in self._workflows:
            raise ConfigError(
                "workflow",
                f"schedule {schedule.name!r}: unknown workflow {schedule.workflow!r}",
            )

    async def list(self) -> list[ScheduleView]:
        """Every schedule, by name, with its next tick."""
        store = await self._opened()
        now = store.now()
        return [
            ScheduleView(
                s, None if s.schedule.paused else ticks_of(s.schedule).after(max(s.since, now))
            )
            for s in await store.list_schedules()
        ]

    async def get(self, name: str) -> StoredSchedule:
        """The schedule named `name`. Raises ConfigError (field `name`) if there is none."""
        store = await self._opened()
        found = await store.get_schedule(name)
        if found is None:
            raise unknown_schedule(name)
        return found

    async def add(self, schedule: Schedule) -> StoredSchedule:
        """Add `schedule`; its ticks count from now. Raises ConfigError (a bad value, a name taken)."""
        checked = checked_schedule(schedule)
        self._check_workflow(checked)
        store = await self._opened()
        return await store.add_schedule(checked)

    async def change(self, name: str, **fields: Any) -> StoredSchedule:
        """Change the fields given of schedule `name` (`cron` or `every` replaces the other).

        The schedule is read, changed and written whole: of two operators
        changing one schedule at once, the last write wins.

        Raises:
            ConfigError: No schedule has that name, a field is unknown, or a value is wrong.
        """
        known = {
            "workflow",
            "cron",
            "every",
            "data",
            "timezone",
            "catch_up",
            "max_catch_up",
            "paused",
        }
        if unknown := sorted(set(fields) - known):
            raise ConfigError(unknown[0], f"schedule {name!r}: no such field")
        current = (await self.get(checked_schedule_name(name))).schedule
        if fields.get("cron") is not None:
            fields.setdefault("every", None)
        if fields.get("every") is not None:
            fields.setdefault("cron", None)
        changed = checked_schedule(replace(current, **fields))
        self._check_workflow(changed)
        store = await self._opened()
        return await store.replace_schedule(changed)

    async def pause(self, name: str) -> StoredSchedule:
        """Pause schedule `name`: no tick fires until it is resumed."""
        return await self.change(name, paused=True)

    async def resume(self, name: str) -> StoredSchedule:
        """Resume schedule `name`: its ticks count from now (those of the pause are not caught up)."""
        return await self.change(name, paused=False)

    async def trigger(self, name: str) -> str:
        """Start schedule `name`'s workflow now, once, outside its ticks; the task's id."""
        s = (await self.get(name)).schedule
        store = await self._opened()
        now = store.now()
        key = f"schedule:{s.name}!triggered@{now.isoformat()}"
        (submitted,) = await store.submit_tasks(
            [NewTask(workflow=s.workflow, input=s.data, key=key)]
        )
        return submitted.task_id
