"""Schedules on SQLite: the plans of `store.sql.schedules`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.store.ops import (
    AddSchedule,
    AdvanceSchedule,
    DeclareSchedule,
    ListSchedules,
    ReplaceSchedule,
)
from shepherd.store.sql import schedules
from shepherd.store.sql.dialect import SQLITE
from shepherd.store.sqlite.batch import READS, WRITES, Reading

if TYPE_CHECKING:
    from shepherd.core.schedules import StoredSchedule
    from shepherd.store.sqlite.batch import SqliteBatch

__all__ = ["add", "advance", "declare", "list_schedules", "replace"]


@WRITES.handles(DeclareSchedule)
def declare(batch: SqliteBatch, ops: Sequence[DeclareSchedule]) -> list[object]:
    """Insert the schedules no row has the name of; whether each was inserted."""
    return batch.run(schedules.declare(batch, ops))


@WRITES.handles(AddSchedule)
def add(batch: SqliteBatch, ops: Sequence[AddSchedule]) -> list[object]:
    """Insert schedules; a name taken already is refused, nothing written."""
    return batch.run(schedules.add(batch, ops))


@WRITES.handles(ReplaceSchedule)
def replace(batch: SqliteBatch, ops: Sequence[ReplaceSchedule]) -> list[object]:
    """Replace schedules' definitions; an unknown name is refused."""
    return batch.run(schedules.replace(batch, ops))


@WRITES.handles(AdvanceSchedule)
def advance(batch: SqliteBatch, ops: Sequence[AdvanceSchedule]) -> list[object]:
    """Record each tick as its schedule's last, where it is later."""
    return batch.run(schedules.advance(batch, ops))


# -- reads ---------------------------------------------------------------------
@READS.handles(ListSchedules)
def list_schedules(at: Reading, op: ListSchedules) -> list[StoredSchedule]:
    """Every schedule, by name."""
    return at.run(schedules.list_schedules(SQLITE, op))
