"""Schedules, for both backends: declared, added, replaced, listed, advanced.

One row per schedule: its definition, when it was created, and `since`, the
instant its ticks count from (the last tick looked at, or when it was created
or last resumed).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from shepherd.core.schedules import CatchUp, Schedule, StoredSchedule
from shepherd.store.schedule_rows import schedule_exists, unknown_schedule
from shepherd.store.sql.plan import Query, one

if TYPE_CHECKING:
    from shepherd.store.ops import (
        AddSchedule,
        AdvanceSchedule,
        DeclareSchedule,
        ListSchedules,
        ReplaceSchedule,
    )
    from shepherd.store.sql.dialect import Dialect
    from shepherd.store.sql.plan import Plan, Writing

__all__ = ["add", "advance", "declare", "list_schedules", "replace"]

_COLUMNS = (
    "name, workflow, cron, every, data, timezone, catch_up, max_catch_up, paused, "
    "created_at, since, last_tick"
)
_INSERT = (
    f"INSERT INTO schedules ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL) "
    f"ON CONFLICT DO NOTHING RETURNING {_COLUMNS}"
)
_REPLACE = (
    "UPDATE schedules SET workflow = ?, cron = ?, every = ?, data = ?, timezone = ?, "
    "catch_up = ?, max_catch_up = ?, since = CASE WHEN paused AND ? THEN ? ELSE since END, "
    f"paused = ? WHERE name = ? RETURNING {_COLUMNS}"
)
_ADVANCE = "UPDATE schedules SET since = ?, last_tick = ? WHERE name = ? AND since < ? RETURNING 1"
_LIST = f"SELECT {_COLUMNS} FROM schedules ORDER BY name"


def _definition(batch: Writing, s: Schedule) -> tuple[Any, ...]:
    """The definition's columns, workflow to max_catch_up, as parameters."""
    return (
        s.workflow,
        s.cron,
        s.every,
        batch.dumps(s.data),
        s.timezone,
        str(s.catch_up),
        s.max_catch_up,
    )


def _insert(batch: Writing, s: Schedule) -> Query:
    params = (s.name, *_definition(batch, s), s.paused, batch.now, batch.now)
    return Query(batch.dialect.sql(_INSERT), params)


def _row(d: Dialect, row: Sequence[Any]) -> StoredSchedule:
    schedule = Schedule(
        name=row[0],
        workflow=row[1],
        cron=row[2],
        every=row[3],
        data=json.loads(row[4]),
        timezone=row[5],
        catch_up=CatchUp(row[6]),
        max_catch_up=row[7],
        paused=bool(row[8]),
    )
    last = None if row[11] is None else d.instant(row[11])
    return StoredSchedule(
        schedule=schedule, created_at=d.instant(row[9]), since=d.instant(row[10]), last_tick=last
    )


def declare(batch: Writing, ops: Sequence[DeclareSchedule]) -> Plan[list[object]]:
    """Insert the schedules no row has the name of; whether each was inserted."""
    inserted = yield [_insert(batch, op.schedule) for op in ops]
    return [bool(rows) for rows in inserted]


def add(batch: Writing, ops: Sequence[AddSchedule]) -> Plan[list[object]]:
    """Insert schedules; a name taken already is refused, nothing written."""
    inserted = yield [_insert(batch, op.schedule) for op in ops]
    return [
        _row(batch.dialect, rows[0]) if rows else schedule_exists(op.schedule.name)
        for op, rows in zip(ops, inserted, strict=True)
    ]


def replace(batch: Writing, ops: Sequence[ReplaceSchedule]) -> Plan[list[object]]:
    """Replace schedules' definitions; one resumed counts from now; an unknown name is refused."""
    sql = batch.dialect.sql(_REPLACE)
    queries = []
    for op in ops:
        s = op.schedule
        resumed = not s.paused
        params = (*_definition(batch, s), resumed, batch.now, s.paused, s.name)
        queries.append(Query(sql, params))
    replaced = yield queries
    return [
        _row(batch.dialect, rows[0]) if rows else unknown_schedule(op.schedule.name)
        for op, rows in zip(ops, replaced, strict=True)
    ]


def advance(batch: Writing, ops: Sequence[AdvanceSchedule]) -> Plan[list[object]]:
    """Record each tick as its schedule's last, where it is later than `since`."""
    d = batch.dialect
    sql = d.sql(_ADVANCE)
    moved = yield [
        Query(sql, (d.stored(op.tick), d.stored(op.tick), op.name, d.stored(op.tick))) for op in ops
    ]
    return [bool(rows) for rows in moved]


# -- reads ---------------------------------------------------------------------
def list_schedules(d: Dialect, op: ListSchedules) -> Plan[list[StoredSchedule]]:
    """Every schedule, by name."""
    return [_row(d, row) for row in (yield from one(d.sql(_LIST)))]
