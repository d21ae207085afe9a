"""The worker registry on SQLite: the plans of `store.sql.workers` (unix seconds)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.store.ops import BeatWorker, DeadWorkers, ListWorkers, RegisterWorker, StopWorker
from shepherd.store.sql import workers
from shepherd.store.sql.dialect import SQLITE
from shepherd.store.sqlite.batch import READS, WRITES, Reading

if TYPE_CHECKING:
    from shepherd.core.workers import Worker
    from shepherd.store.sqlite.batch import SqliteBatch

__all__ = ["beat", "dead_workers", "list_workers", "register", "stop"]


@WRITES.handles(RegisterWorker)
def register(batch: SqliteBatch, ops: Sequence[RegisterWorker]) -> list[object]:
    """Write each process's row afresh; forget rows silent for longer than the retention."""
    return batch.run(workers.register(batch, ops))


@WRITES.handles(BeatWorker)
def beat(batch: SqliteBatch, ops: Sequence[BeatWorker]) -> list[object]:
    """Heartbeats: True for each row beaten, False where it is gone or stopped."""
    return batch.run(workers.beat(batch, ops))


@WRITES.handles(StopWorker)
def stop(batch: SqliteBatch, ops: Sequence[StopWorker]) -> list[object]:
    """Mark rows stopped (graceful stops)."""
    return batch.run(workers.stop(batch, ops))


# -- reads ---------------------------------------------------------------------
@READS.handles(ListWorkers)
def list_workers(at: Reading, op: ListWorkers) -> list[Worker]:
    """Workers last heard from at or after `since` (all when None), newest started first."""
    return at.run(workers.list_workers(SQLITE, op))


@READS.handles(DeadWorkers)
def dead_workers(at: Reading, op: DeadWorkers) -> set[str]:
    """The instances that are stopped, unknown, or silent for `ttl` seconds or more."""
    return at.run(workers.dead_workers(SQLITE, at.now, op))
