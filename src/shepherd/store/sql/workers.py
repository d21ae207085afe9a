"""The worker registry, for both backends: each process's row, beaten until it stops.

Rows are timed on the batch's instant (the store's clock: the database's on
PostgreSQL, so processes on machines whose clocks disagree still agree on
which of them are alive); the reads compare with the store's clock too (or a
test clock's instant). A beat takes the instant in SQL: it need not wait for
PostgreSQL's clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.store.contract import WORKER_RETENTION
from shepherd.store.sql.plan import Query, each, one
from shepherd.store.worker_rows import WORKER_COLUMNS, names, worker_from_row

if TYPE_CHECKING:
    from shepherd.core.workers import Worker
    from shepherd.store.ops import BeatWorker, DeadWorkers, ListWorkers, RegisterWorker, StopWorker
    from shepherd.store.sql.dialect import Dialect
    from shepherd.store.sql.plan import Plan, Writing

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
    "UPDATE workers SET beat_at = {now}, died_at = NULL, reaped_at = NULL "
    "WHERE instance = ? AND stopped_at IS NULL RETURNING instance"
)
_STOP = "UPDATE workers SET stopped_at = ? WHERE instance = ? AND stopped_at IS NULL"
_LIST = f"SELECT {WORKER_COLUMNS} FROM workers ORDER BY started_at DESC, instance"
_LIST_SINCE = (
    f"SELECT {WORKER_COLUMNS} FROM workers WHERE coalesce(stopped_at, beat_at) >= ? "
    "ORDER BY started_at DESC, instance"
)
# (instances, now, ttl): the live ones among instances.
_ALIVE = (
    "SELECT instance FROM workers WHERE instance {list} AND stopped_at IS NULL "
    "AND died_at IS NULL AND beat_at > {now} - ?{float}{seconds}"
)


def register(batch: Writing, ops: Sequence[RegisterWorker]) -> Plan[list[object]]:
    """Write each process's row afresh; forget rows silent for longer than the retention."""
    d, now = batch.dialect, batch.now
    forget = Query(d.sql(_FORGET), (d.later(now, -WORKER_RETENTION),), rows=False)
    sql = d.sql(_REGISTER)
    found = yield [
        forget,
        *(
            Query(sql, (op.instance, op.host, op.pid, names(op.roles), names(op.agents), now, now))
            for op in ops
        ),
    ]
    return [worker_from_row(rows[0], d.instant) for rows in found[1:]]


def beat(batch: Writing, ops: Sequence[BeatWorker]) -> Plan[list[object]]:
    """Heartbeats: True for each row beaten, False where it is gone or stopped."""
    sql = batch.dialect.sql(_BEAT)
    return [bool(rows) for rows in (yield [Query(sql, (batch.instant, op.instance)) for op in ops])]


def stop(batch: Writing, ops: Sequence[StopWorker]) -> Plan[list[object]]:
    """Mark rows stopped (graceful stops)."""
    yield [each(batch.dialect.sql(_STOP), [(batch.now, op.instance) for op in ops])]
    return [None] * len(ops)


# -- reads ---------------------------------------------------------------------
def list_workers(d: Dialect, op: ListWorkers) -> Plan[list[Worker]]:
    """Workers last heard from at or after `since` (all when None), newest started first."""
    if op.since is None:
        rows = yield from one(d.sql(_LIST))
    else:
        rows = yield from one(d.sql(_LIST_SINCE), (d.stored(op.since),))
    return [worker_from_row(row, d.instant) for row in rows]


def dead_workers(d: Dialect, now: object, op: DeadWorkers) -> Plan[set[str]]:
    """The instances that are stopped, unknown, or silent for `ttl` seconds or more."""
    wanted = list(dict.fromkeys(op.instances))
    queries = []
    for chunk in d.chunks(wanted):
        sql, listed = d.listed(_ALIVE, chunk)
        queries.append(Query(sql, (*listed, now, op.ttl)))
    alive = {instance for rows in (yield queries) for (instance,) in rows}
    return set(wanted) - alive
