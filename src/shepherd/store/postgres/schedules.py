"""Schedules on PostgreSQL: the plans of `store.sql.schedules`."""

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
from shepherd.store.postgres.batch import WRITES
from shepherd.store.postgres.reader import READS, read
from shepherd.store.sql import schedules
from shepherd.store.sql.dialect import POSTGRES

if TYPE_CHECKING:
    from shepherd.core.schedules import StoredSchedule
    from shepherd.store.postgres.batch import PostgresBatch
    from shepherd.store.postgres.reader import Reader

__all__ = ["add", "advance", "declare", "list_schedules", "replace"]


@WRITES.handles(DeclareSchedule)
async def declare(batch: PostgresBatch, ops: Sequence[DeclareSchedule]) -> list[object]:
    """Insert the schedules no row has the name of; whether each was inserted."""
    return await batch.run(schedules.declare(batch, ops))


@WRITES.handles(AddSchedule)
async def add(batch: PostgresBatch, ops: Sequence[AddSchedule]) -> list[object]:
    """Insert schedules; a name taken already is refused, nothing written."""
    return await batch.run(schedules.add(batch, ops))


@WRITES.handles(ReplaceSchedule)
async def replace(batch: PostgresBatch, ops: Sequence[ReplaceSchedule]) -> list[object]:
    """Replace schedules' definitions; an unknown name is refused."""
    return await batch.run(schedules.replace(batch, ops))


@WRITES.handles(AdvanceSchedule)
async def advance(batch: PostgresBatch, ops: Sequence[AdvanceSchedule]) -> list[object]:
    """Record each tick as its schedule's last, where it is later."""
    return await batch.run(schedules.advance(batch, ops))


# -- reads ---------------------------------------------------------------------
@READS.handles(ListSchedules)
async def list_schedules(reader: Reader, op: ListSchedules) -> list[StoredSchedule]:
    """Every schedule, by name."""
    return await read(reader, schedules.list_schedules(POSTGRES, op))
