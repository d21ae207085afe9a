"""Batch handlers and reads for the worker registry.

Rows are timed on the batch's instant (the database's clock), so processes on
machines whose clocks disagree still agree on which of them are alive. The
reads compare with the database's `now()` too (or the test clock's instant).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

from shepherd.store.contract import WORKER_RETENTION
from shepherd.store.ops import BeatWorker, DeadWorkers, ListWorkers, RegisterWorker, StopWorker
from shepherd.store.postgres.batch import INSTANT, WRITES
from shepherd.store.postgres.reader import READS
from shepherd.store.postgres.rows import utc
from shepherd.store.worker_rows import WORKER_COLUMNS, names, worker_from_row

if TYPE_CHECKING:
    from shepherd.core.workers import Worker
    from shepherd.store.postgres.batch import PostgresBatch
    from shepherd.store.postgres.reader import Reader

__all__ = ["beat", "dead_workers", "list_workers", "register", "stop"]

_RETENTION = timedelta(seconds=WORKER_RETENTION)

_REGISTER = (
    "INSERT INTO workers AS w (instance, host, pid, roles, agents, started_at, beat_at, "
    "stopped_at) VALUES (%s, %s, %s, %s, %s, %s, %s, NULL) ON CONFLICT (instance) DO UPDATE SET "
    "host = excluded.host, pid = excluded.pid, roles = excluded.roles, "
    "agents = excluded.agents, started_at = excluded.started_at, beat_at = excluded.beat_at, "
    f"stopped_at = NULL, died_at = NULL, reaped_at = NULL RETURNING {WORKER_COLUMNS}"
)
_FORGET = "DELETE FROM workers WHERE coalesce(stopped_at, beat_at) < %s"
_BEAT = f"UPDATE workers SET beat_at = {INSTANT}, died_at = NULL, reaped_at = NULL WHERE instance = %s AND stopped_at IS NULL RETURNING instance"
_STOP = "UPDATE workers SET stopped_at = %s WHERE instance = %s AND stopped_at IS NULL"


@WRITES.handles(RegisterWorker)
async def register(batch: PostgresBatch, ops: Sequence[RegisterWorker]) -> list[object]:
    """Write each process's row afresh; forget rows silent for longer than the retention."""
    now = batch.now
    await batch.send(_FORGET, (now - _RETENTION,))
    rows = await batch.first_rows(
        _REGISTER,
        [(op.instance, op.host, op.pid, names(op.roles), names(op.agents), now, now) for op in ops],
    )
    out: list[object] = []
    for row in rows:
        if row is None:  # pragma: no cover - an upsert with RETURNING returns its row
            raise RuntimeError("worker registration returned no row")
        out.append(worker_from_row(row, utc))
    return out


@WRITES.handles(BeatWorker)
async def beat(batch: PostgresBatch, ops: Sequence[BeatWorker]) -> list[object]:
    """Heartbeats: True for each row beaten, False where it is gone or stopped."""
    return [*await batch.found(_BEAT, [(batch.instant, op.instance) for op in ops])]


@WRITES.handles(StopWorker)
async def stop(batch: PostgresBatch, ops: Sequence[StopWorker]) -> list[object]:
    """Mark rows stopped (graceful stops)."""
    for op in ops:
        await batch.send(_STOP, (batch.now, op.instance))
    return [None] * len(ops)


# -- reads ---------------------------------------------------------------------
_LIST = f"SELECT {WORKER_COLUMNS} FROM workers ORDER BY started_at DESC, instance"
_LIST_SINCE = (
    f"SELECT {WORKER_COLUMNS} FROM workers WHERE coalesce(stopped_at, beat_at) >= %s "
    "ORDER BY started_at DESC, instance"
)
# The live ones among instances: (instances, now or NULL for the database's, ttl).
_ALIVE = (
    "SELECT instance FROM workers WHERE instance = ANY(%s::text[]) AND stopped_at IS NULL "
    "AND died_at IS NULL AND beat_at > coalesce(%s::timestamptz, now()) - %s * interval '1 second'"
)


@READS.handles(ListWorkers)
async def list_workers(reader: Reader, op: ListWorkers) -> list[Worker]:
    """Workers last heard from at or after `since` (all when None), newest started first."""
    if op.since is None:
        rows = await reader.fetch(_LIST)
    else:
        rows = await reader.fetch(_LIST_SINCE, (op.since,))
    return [worker_from_row(r, utc) for r in rows]


@READS.handles(DeadWorkers)
async def dead_workers(reader: Reader, op: DeadWorkers) -> set[str]:
    """The instances that are stopped, unknown, or silent for `ttl` seconds or more."""
    wanted = set(op.instances)
    rows = await reader.fetch(_ALIVE, (list(wanted), reader.clock_param(), op.ttl))
    return wanted - {instance for (instance,) in rows}
