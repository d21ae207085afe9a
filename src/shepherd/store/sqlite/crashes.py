"""Crash attribution: which tasks a dead process held, and the supervisor's verdicts.

Verdicts are written and fenced like every supervisor decision
(`leases.apply_effects`): by the task's `lock_epoch` and by the supervisor's
lease, read under the write lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.core.alerts import on_decision
from shepherd.core.effects import on_crash
from shepherd.store.contract import HeldRequest
from shepherd.store.ops import (
    ApplyCrash,
    CrashVictims,
    HeldRequests,
    MarkDied,
    ReapWorker,
    UnreapedWorkers,
)
from shepherd.store.rows import unix_instant
from shepherd.store.sqlite.batch import READS, WRITES, Reading
from shepherd.store.sqlite.leases import apply_effects
from shepherd.store.sqlite.rows import TASK_COLUMNS, chunks, task_from_row
from shepherd.store.worker_rows import WORKER_COLUMNS, worker_from_row

if TYPE_CHECKING:
    from shepherd.core.records import Task
    from shepherd.core.workers import Worker
    from shepherd.store.sqlite.batch import Batch

__all__ = ["apply", "crash_victims", "held_requests", "mark_died", "reap", "unreaped_workers"]

#: Rows of processes not stopped and not yet attributed: the live and the newly dead.
_UNREAPED = (
    f"SELECT {WORKER_COLUMNS} FROM workers WHERE stopped_at IS NULL AND reaped_at IS NULL "
    "ORDER BY instance"
)
_RUNNING = (
    "SELECT task_id, min(seq) FROM requests WHERE taken_by = ? AND complete_by > ? GROUP BY task_id"
)
_VICTIMS = (
    f"SELECT {TASK_COLUMNS} FROM tasks WHERE process_state IN ('processing', 'compensating') "
    "AND locked_by IS NOT NULL AND (locked_by = ? OR id IN "
    "(SELECT task_id FROM requests WHERE taken_by = ? AND complete_by > ?)) ORDER BY id"
)
#: The requests of some tasks (`{marks}`: one ? each), queued or taken.
_HELD = (
    "SELECT task_id, seq, lock_epoch, taken_by, suspect, created_at, complete_by FROM requests "
    "WHERE task_id IN ({marks}) ORDER BY task_id, seq"
)
_MARK_DIED = (
    "UPDATE workers SET died_at = ? WHERE instance = ? AND stopped_at IS NULL AND died_at IS NULL"
)
_REAP = "UPDATE workers SET reaped_at = ? WHERE instance = ?"


@WRITES.handles(MarkDied)
def mark_died(batch: Batch, ops: Sequence[MarkDied]) -> list[object]:
    """Processes found gone on their host: dead from now, whatever their last beat."""
    return [batch.conn.execute(_MARK_DIED, (batch.now, op.instance)).rowcount == 1 for op in ops]


@WRITES.handles(ReapWorker)
def reap(batch: Batch, ops: Sequence[ReapWorker]) -> list[object]:
    """Record that a dead process's crash was attributed to the tasks it held."""
    batch.conn.executemany(_REAP, [(batch.now, op.instance) for op in ops])
    return [None] * len(ops)


@WRITES.handles(ApplyCrash)
def apply(batch: Batch, ops: Sequence[ApplyCrash]) -> list[object]:
    """Apply crash verdicts, fenced by the task's lock_epoch and the supervisor's lease.

    A quarantine (`Escalate`) stores its alert with the task.
    """
    return apply_effects(
        batch,
        [(op.task, op.leader, on_crash(op.decision), on_decision(op.decision)) for op in ops],
    )


# -- reads ---------------------------------------------------------------------
@READS.handles(UnreapedWorkers)
def unreaped_workers(at: Reading, op: UnreapedWorkers) -> list[Worker]:
    """Processes neither stopped nor attributed yet (live ones, and the newly dead)."""
    conn = at.conn
    return [worker_from_row(row, unix_instant) for row in conn.execute(_UNREAPED)]


@READS.handles(CrashVictims)
def crash_victims(at: Reading, op: CrashVictims) -> list[tuple[Task, bool, int | None]]:
    """Tasks in a supervised state owned by `instance`, or with a request its agent held.

    A request counts as running in `instance` if its agent took it and its
    complete_by was still ahead at the process's last beat.
    """
    conn = at.conn
    instance, beat_at = op.instance, op.beat_at.timestamp()
    owner, agent = f"{instance}/s", f"{instance}/a"
    running = dict(conn.execute(_RUNNING, (agent, beat_at)).fetchall())
    rows = conn.execute(_VICTIMS, (owner, agent, beat_at)).fetchall()
    return [(task_from_row(row), row["locked_by"] == owner, running.get(row["id"])) for row in rows]


@READS.handles(HeldRequests)
def held_requests(at: Reading, op: HeldRequests) -> list[HeldRequest]:
    """The requests of `op.task_ids`, queued or taken: who holds their steps."""
    conn = at.conn
    held: list[HeldRequest] = []
    for chunk in chunks(list(dict.fromkeys(op.task_ids))):
        rows = conn.execute(_HELD.format(marks=",".join("?" * len(chunk))), chunk)
        held.extend(
            HeldRequest(
                task_id=row["task_id"],
                seq=row["seq"],
                lock_epoch=row["lock_epoch"],
                taken_by=row["taken_by"],
                suspect=bool(row["suspect"]),
                created_at=unix_instant(row["created_at"]),
                complete_by=unix_instant(row["complete_by"]),
            )
            for row in rows
        )
    return held
