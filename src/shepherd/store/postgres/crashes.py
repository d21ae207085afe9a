"""Crash attribution on PostgreSQL: the plans of `store.sql.crashes`.

A verdict's task row is taken with SKIP LOCKED (a row held by another session
is left for the next scan), its supervisor's lease `FOR SHARE`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.store.ops import (
    ApplyCrash,
    CrashVictims,
    HeldRequests,
    MarkDied,
    ReapWorker,
    UnreapedWorkers,
)
from shepherd.store.postgres.batch import WRITES
from shepherd.store.postgres.reader import READS, read
from shepherd.store.sql import crashes
from shepherd.store.sql.dialect import POSTGRES

if TYPE_CHECKING:
    from shepherd.core.records import Task
    from shepherd.core.workers import Worker
    from shepherd.store.contract import HeldRequest
    from shepherd.store.postgres.batch import PostgresBatch
    from shepherd.store.postgres.reader import Reader

# The handlers are filed in WRITES and READS, not imported by name.
__all__: list[str] = []


@WRITES.handles(MarkDied)
async def mark_died(batch: PostgresBatch, ops: Sequence[MarkDied]) -> list[object]:
    """Processes found gone on their host: dead from now, whatever their last beat."""
    return await batch.run(crashes.mark_died(batch, ops))


@WRITES.handles(ReapWorker)
async def reap(batch: PostgresBatch, ops: Sequence[ReapWorker]) -> list[object]:
    """Record that a dead process's crash was attributed to the tasks it held."""
    return await batch.run(crashes.reap(batch, ops))


@WRITES.handles(ApplyCrash)
async def apply(batch: PostgresBatch, ops: Sequence[ApplyCrash]) -> list[object]:
    """Apply crash verdicts, fenced by the task's lock_epoch and the supervisor's lease."""
    return await batch.run(crashes.apply(batch, ops))


# -- reads ---------------------------------------------------------------------
@READS.handles(UnreapedWorkers)
async def unreaped_workers(reader: Reader, op: UnreapedWorkers) -> list[Worker]:
    """Processes neither stopped nor attributed yet (live ones, and the newly dead)."""
    return await read(reader, crashes.unreaped_workers(POSTGRES, op))


@READS.handles(CrashVictims)
async def crash_victims(reader: Reader, op: CrashVictims) -> list[tuple[Task, bool, int | None]]:
    """Tasks in a supervised state owned by `instance`, or with a request its agent held."""
    return await read(reader, crashes.crash_victims(POSTGRES, op))


@READS.handles(HeldRequests)
async def held_requests(reader: Reader, op: HeldRequests) -> list[HeldRequest]:
    """The requests of `op.task_ids`, queued or taken: who holds their steps."""
    return await read(reader, crashes.held_requests(POSTGRES, op))
