"""Batch handlers and reads for the worker registry.

`now` is the store's clock (unix seconds), as for every other row this store
writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.store.contract import WORKER_RETENTION
from shepherd.store.ops import BeatWorker, DeadWorkers, ListWorkers, RegisterWorker, StopWorker
from shepherd.store.rows import unix_instant
from shepherd.store.sqlite.batch import READS, WRITES, Reading
from shepherd.store.sqlite.rows import chunks
from shepherd.store.worker_rows import WORKER_COLUMNS, names, worker_from_row

if TYPE_CHECKING:
    from shepherd.core.workers import Worker
    from shepherd.store.sqlite.batch import SqliteBatch

__all__ = ["beat", "dead_workers", "list_workers", "register", "stop"]

_REGISTER = (
    "INSERT INTO workers (instance, host, pid, roles, agents, started_at, beat_at, stopped_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, NULL) ON CONFLICT (instance) DO UPDATE SET "
    "host = excluded.host, pid = excluded.pid, roles = excluded.roles, "
    "agents = excluded.agents, started_at = excluded.started_at, beat_at = excluded.beat_at, "
    f"stopped_at = NULL, died_at = NULL, reaped_at = NULL RETURNING {WORKER_COLUMNS}"
)
_FORGET = "DELETE FROM workers WHERE coalesce(stopped_at, beat_at) < ?"
_BEAT = (
    "UPDATE workers SET beat_at = ?, died_at = NULL, reaped_at = NULL "
    "WHERE instance = ? AND stopped_at IS NULL"
)
_STOP = "UPDATE workers SET stopped_at = ? WHERE instance = ? AND stopped_at IS NULL"
_LIST = f"SELECT {WORKER_COLUMNS} FROM workers ORDER BY started_at DESC, instance"
_LIST_SINCE = (
    f"SELECT {WORKER_COLUMNS} FROM workers WHERE coalesce(stopped_at, beat_at) >= ? "
    "ORDER BY started_at DESC, instance"
)
_ALIVE = (
    "SELECT instance FROM workers WHERE instance IN ({marks}) "
    "AND stopped_at IS NULL AND died_at IS NULL AND beat_at > ?"
)


@WRITES.handles(RegisterWorker)
def register(batch: SqliteBatch, ops: Sequence[RegisterWorker]) -> list[object]:
    """Write each process's row afresh; forget rows silent for longer than the retention."""
    conn, now = batch.conn, batch.now
    conn.execute(_FORGET, (now - WORKER_RETENTION,))
    out: list[object] = []
    for op in ops:
        instance, host, pid, roles, agents = op.instance, op.host, op.pid, op.roles, op.agents
        row = conn.execute(
            _REGISTER, (instance, host, pid, names(roles), names(agents), now, now)
        ).fetchone()
        out.append(worker_from_row(row, unix_instant))
    return out


@WRITES.handles(BeatWorker)
def beat(batch: SqliteBatch, ops: Sequence[BeatWorker]) -> list[object]:
    """Heartbeats: True for each row beaten, False where it is gone or stopped."""
    return [*batch.changed(_BEAT, [(batch.now, op.instance) for op in ops])]


@WRITES.handles(StopWorker)
def stop(batch: SqliteBatch, ops: Sequence[StopWorker]) -> list[object]:
    """Mark rows stopped (graceful stops)."""
    batch.conn.executemany(_STOP, [(batch.now, op.instance) for op in ops])
    return [None] * len(ops)


# -- reads ---------------------------------------------------------------------
@READS.handles(ListWorkers)
def list_workers(at: Reading, op: ListWorkers) -> list[Worker]:
    """Workers last heard from at or after `since` (all when None), newest started first."""
    conn = at.conn
    since = op.since
    if since is None:
        rows = conn.execute(_LIST).fetchall()
    else:
        rows = conn.execute(_LIST_SINCE, (since.timestamp(),)).fetchall()
    return [worker_from_row(row, unix_instant) for row in rows]


@READS.handles(DeadWorkers)
def dead_workers(at: Reading, op: DeadWorkers) -> set[str]:
    """The instances that are stopped, unknown, or silent for `ttl` seconds or more."""
    conn, now = at.conn, at.now
    wanted, ttl = list(dict.fromkeys(op.instances)), op.ttl
    alive: set[str] = set()
    for chunk in chunks(wanted):
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(_ALIVE.format(marks=marks), (*chunk, now - ttl))
        alive.update(row["instance"] for row in rows)
    return set(wanted) - alive
