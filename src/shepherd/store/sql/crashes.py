"""Crash attribution, for both backends: which tasks a dead process held, and the verdicts.

Verdicts are written and fenced like every supervisor decision
(`leases.apply_effects`): by the task's `lock_epoch` and by the supervisor's
lease.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.core.alerts import on_decision
from shepherd.core.effects import on_crash
from shepherd.store.contract import HeldRequest
from shepherd.store.rows import TASK_COLUMNS, TaskCol
from shepherd.store.sql.leases import apply_effects
from shepherd.store.sql.plan import Query, each, one
from shepherd.store.worker_rows import WORKER_COLUMNS, worker_from_row

if TYPE_CHECKING:
    from shepherd.core.records import Task
    from shepherd.core.workers import Worker
    from shepherd.store.ops import (
        ApplyCrash,
        CrashVictims,
        HeldRequests,
        MarkDied,
        ReapWorker,
        UnreapedWorkers,
    )
    from shepherd.store.sql.dialect import Dialect
    from shepherd.store.sql.plan import Plan, Writing

__all__ = ["apply", "crash_victims", "held_requests", "mark_died", "reap", "unreaped_workers"]

#: Rows of processes not stopped and not yet attributed: the live and the newly dead.
_UNREAPED = (
    f"SELECT {WORKER_COLUMNS} FROM workers WHERE stopped_at IS NULL AND reaped_at IS NULL "
    "ORDER BY instance"
)
# (agent owner, beat_at): the tasks whose request the dead agent held.
_RUNNING = (
    "SELECT task_id, min(seq) FROM requests WHERE taken_by = ? AND complete_by > ?{ts} "
    "GROUP BY task_id"
)
# (owner, agent owner, beat_at)
_VICTIMS = (
    f"SELECT {TASK_COLUMNS} FROM tasks WHERE process_state IN ('processing', 'compensating') "
    "AND locked_by IS NOT NULL AND (locked_by = ? OR id IN "
    "(SELECT task_id FROM requests WHERE taken_by = ? AND complete_by > ?{ts})) ORDER BY id"
)
# The requests of some tasks, queued or taken.
_HELD = (
    "SELECT task_id, seq, lock_epoch, taken_by, suspect, created_at, complete_by FROM requests "
    "WHERE task_id {list} ORDER BY task_id, seq"
)
_MARK_DIED = (
    "UPDATE workers SET died_at = ? WHERE instance = ? AND stopped_at IS NULL "
    "AND died_at IS NULL RETURNING instance"
)
_REAP = "UPDATE workers SET reaped_at = ? WHERE instance = ?"


def mark_died(batch: Writing, ops: Sequence[MarkDied]) -> Plan[list[object]]:
    """Processes found gone on their host: dead from now, whatever their last beat."""
    sql = batch.dialect.sql(_MARK_DIED)
    return [bool(rows) for rows in (yield [Query(sql, (batch.now, op.instance)) for op in ops])]


def reap(batch: Writing, ops: Sequence[ReapWorker]) -> Plan[list[object]]:
    """Record that a dead process's crash was attributed to the tasks it held."""
    yield [each(batch.dialect.sql(_REAP), [(batch.now, op.instance) for op in ops])]
    return [None] * len(ops)


def apply(batch: Writing, ops: Sequence[ApplyCrash]) -> Plan[list[object]]:
    """Apply crash verdicts, fenced by the task's lock_epoch and the supervisor's lease.

    A quarantine (`Escalate`) stores its alert with the task.
    """
    writes = [(op.task, op.leader, on_crash(op.decision), on_decision(op.decision)) for op in ops]
    return (yield from apply_effects(batch, writes))


# -- reads ---------------------------------------------------------------------
def unreaped_workers(d: Dialect, op: UnreapedWorkers) -> Plan[list[Worker]]:
    """Processes neither stopped nor attributed yet (live ones, and the newly dead)."""
    return [worker_from_row(row, d.instant) for row in (yield from one(d.sql(_UNREAPED)))]


def crash_victims(d: Dialect, op: CrashVictims) -> Plan[list[tuple[Task, bool, int | None]]]:
    """Tasks in a supervised state owned by `instance`, or with a request its agent held.

    A request counts as running in `instance` if its agent took it and its
    complete_by was still ahead at the process's last beat.
    """
    owner, agent, beat_at = f"{op.instance}/s", f"{op.instance}/a", d.stored(op.beat_at)
    running = {t: int(seq) for t, seq in (yield from one(d.sql(_RUNNING), (agent, beat_at)))}
    rows = yield from one(d.sql(_VICTIMS), (owner, agent, beat_at))
    return [
        (d.records.task(r), r[TaskCol.LOCKED_BY] == owner, running.get(r[TaskCol.ID])) for r in rows
    ]


def held_requests(d: Dialect, op: HeldRequests) -> Plan[list[HeldRequest]]:
    """The requests of `op.task_ids`, queued or taken: who holds their steps."""
    ids = list(dict.fromkeys(op.task_ids))
    found = yield [Query(*d.listed(_HELD, chunk)) for chunk in d.chunks(ids)]
    return [
        HeldRequest(
            task_id=t,
            seq=int(seq),
            lock_epoch=int(epoch),
            taken_by=by,
            suspect=bool(s),
            created_at=d.instant(at),
            complete_by=d.instant(until),
        )
        for rows in found
        for t, seq, epoch, by, s, at, until in rows
    ]
