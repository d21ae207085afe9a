"""The worker registry on PostgreSQL: the plans of `store.sql.workers` (the database's clock)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.store.ops import BeatWorker, DeadWorkers, ListWorkers, RegisterWorker, StopWorker
from shepherd.store.postgres.batch import WRITES
from shepherd.store.postgres.phases import Second, phased
from shepherd.store.postgres.reader import READS, read
from shepherd.store.sql import workers
from shepherd.store.sql.dialect import POSTGRES

if TYPE_CHECKING:
    from shepherd.core.workers import Worker
    from shepherd.store.postgres.batch import PostgresBatch
    from shepherd.store.postgres.reader import Reader

__all__ = ["beat", "dead_workers", "list_workers", "register", "stop"]


@WRITES.handles(RegisterWorker)
async def register(batch: PostgresBatch, ops: Sequence[RegisterWorker]) -> list[object]:
    """Write each process's row afresh; forget rows silent for longer than the retention."""
    return await batch.run(workers.register(batch, ops))


@phased(BeatWorker)
async def beat(batch: PostgresBatch, ops: Sequence[BeatWorker]) -> Second:
    """Heartbeats: True for each row beaten, False where it is gone or stopped."""
    return await batch.begin(workers.beat(batch, ops))


@WRITES.handles(StopWorker)
async def stop(batch: PostgresBatch, ops: Sequence[StopWorker]) -> list[object]:
    """Mark rows stopped (graceful stops)."""
    return await batch.run(workers.stop(batch, ops))


# -- reads ---------------------------------------------------------------------
@READS.handles(ListWorkers)
async def list_workers(reader: Reader, op: ListWorkers) -> list[Worker]:
    """Workers last heard from at or after `since` (all when None), newest started first."""
    return await read(reader, workers.list_workers(POSTGRES, op))


@READS.handles(DeadWorkers)
async def dead_workers(reader: Reader, op: DeadWorkers) -> set[str]:
    """The instances that are stopped, unknown, or silent for `ttl` seconds or more."""
    return await read(reader, workers.dead_workers(POSTGRES, reader.clock_param(), op))
