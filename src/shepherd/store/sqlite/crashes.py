"""Crash attribution on SQLite: the plans of `store.sql.crashes`, under the write lock."""

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
from shepherd.store.sql import crashes
from shepherd.store.sql.dialect import SQLITE
from shepherd.store.sqlite.batch import READS, WRITES, Reading

if TYPE_CHECKING:
    from shepherd.core.records import Task
    from shepherd.core.workers import Worker
    from shepherd.store.contract import HeldRequest
    from shepherd.store.sqlite.batch import SqliteBatch

# The handlers are filed in WRITES and READS, not imported by name.
__all__: list[str] = []


@WRITES.handles(MarkDied)
def mark_died(batch: SqliteBatch, ops: Sequence[MarkDied]) -> list[object]:
    """Processes found gone on their host: dead from now, whatever their last beat."""
    return batch.run(crashes.mark_died(batch, ops))


@WRITES.handles(ReapWorker)
def reap(batch: SqliteBatch, ops: Sequence[ReapWorker]) -> list[object]:
    """Record that a dead process's crash was attributed to the tasks it held."""
    return batch.run(crashes.reap(batch, ops))


@WRITES.handles(ApplyCrash)
def apply(batch: SqliteBatch, ops: Sequence[ApplyCrash]) -> list[object]:
    """Apply crash verdicts, fenced by the task's lock_epoch and the supervisor's lease."""
    return batch.run(crashes.apply(batch, ops))


# -- reads ---------------------------------------------------------------------
@READS.handles(UnreapedWorkers)
def unreaped_workers(at: Reading, op: UnreapedWorkers) -> list[Worker]:
    """Processes neither stopped nor attributed yet (live ones, and the newly dead)."""
    return at.run(crashes.unreaped_workers(SQLITE, op))


@READS.handles(CrashVictims)
def crash_victims(at: Reading, op: CrashVictims) -> list[tuple[Task, bool, int | None]]:
    """Tasks in a supervised state owned by `instance`, or with a request its agent held."""
    return at.run(crashes.crash_victims(SQLITE, op))


@READS.handles(HeldRequests)
def held_requests(at: Reading, op: HeldRequests) -> list[HeldRequest]:
    """The requests of `op.task_ids`, queued or taken: who holds their steps."""
    return at.run(crashes.held_requests(SQLITE, op))
