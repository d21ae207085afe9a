"""PostgreSQL: crash attribution — which tasks a dead process held, and the supervisor's verdicts.

Verdicts are written and fenced like every supervisor decision
(`leases.apply_effects`): by the task's `lock_epoch` (the row taken with SKIP
LOCKED, so a row held by another session is left for the next scan) and by the
supervisor's lease (`FOR SHARE`).
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
from shepherd.store.postgres.batch import WRITES
from shepherd.store.postgres.leases import apply_effects
from shepherd.store.postgres.reader import READS
from shepherd.store.postgres.rows import TASK_COLUMNS, TaskCol, task_from_row, utc
from shepherd.store.worker_rows import WORKER_COLUMNS, worker_from_row

if TYPE_CHECKING:
    from shepherd.core.records import Task
    from shepherd.core.workers import Worker
    from shepherd.store.postgres.batch import Batch
    from shepherd.store.postgres.reader import Reader

__all__ = ["HELD", "RUNNING", "UNREAPED", "VICTIMS", "apply", "held_requests", "mark_died", "reap"]

UNREAPED = (
    f"SELECT {WORKER_COLUMNS} FROM workers WHERE stopped_at IS NULL AND reaped_at IS NULL "
    "ORDER BY instance"
)
#: (task ids): their requests, queued or taken.
HELD = (
    "SELECT task_id, seq, lock_epoch, taken_by, suspect, created_at, complete_by FROM requests "
    "WHERE task_id = ANY(%s::text[]) ORDER BY task_id, seq"
)
#: (agent owner, beat_at): the tasks whose request the dead agent held.
RUNNING = (
    "SELECT task_id, min(seq) FROM requests WHERE taken_by = %s "
    "AND complete_by > %s::timestamptz GROUP BY task_id"
)
#: (owner, agent owner, beat_at).
VICTIMS = (
    f"SELECT {TASK_COLUMNS} FROM tasks WHERE process_state IN ('processing', 'compensating') "
    "AND locked_by IS NOT NULL AND (locked_by = %s OR id IN "
    "(SELECT task_id FROM requests WHERE taken_by = %s AND complete_by > %s::timestamptz)) "
    "ORDER BY id"
)
_MARK_DIED = (
    "UPDATE workers SET died_at = %s WHERE instance = %s AND stopped_at IS NULL "
    "AND died_at IS NULL RETURNING instance"
)
_REAP = "UPDATE workers SET reaped_at = %s WHERE instance = %s"


@WRITES.handles(MarkDied)
async def mark_died(batch: Batch, ops: Sequence[MarkDied]) -> list[object]:
    """Processes found gone on their host: dead from now, whatever their last beat."""
    cursors = [await batch.send(_MARK_DIED, (batch.now, op.instance)) for op in ops]
    return [await cursor.fetchone() is not None for cursor in cursors]


@WRITES.handles(ReapWorker)
async def reap(batch: Batch, ops: Sequence[ReapWorker]) -> list[object]:
    """Record that a dead process's crash was attributed to the tasks it held."""
    for instance in (op.instance for op in ops):
        await batch.send(_REAP, (batch.now, instance))
    return [None] * len(ops)


@WRITES.handles(ApplyCrash)
async def apply(batch: Batch, ops: Sequence[ApplyCrash]) -> list[object]:
    """Apply crash verdicts, fenced by the task's lock_epoch and the supervisor's lease.

    A quarantine (`Escalate`) stores its alert with the task.
    """
    return await apply_effects(
        batch,
        [(op.task, op.leader, on_crash(op.decision), on_decision(op.decision)) for op in ops],
    )


# -- reads ---------------------------------------------------------------------
@READS.handles(UnreapedWorkers)
async def unreaped_workers(reader: Reader, op: UnreapedWorkers) -> list[Worker]:
    """Processes neither stopped nor attributed yet (live ones, and the newly dead)."""
    return [worker_from_row(r, utc) for r in await reader.fetch(UNREAPED)]


@READS.handles(CrashVictims)
async def crash_victims(reader: Reader, op: CrashVictims) -> list[tuple[Task, bool, int | None]]:
    """Tasks in a supervised state owned by `instance`, or with a request its agent held.

    A request counts as running in `instance` if its agent took it and its
    complete_by was still ahead at the process's last beat.
    """
    owner, agent = f"{op.instance}/s", f"{op.instance}/a"
    running = {t: int(seq) for t, seq in await reader.fetch(RUNNING, (agent, op.beat_at))}
    rows = await reader.fetch(VICTIMS, (owner, agent, op.beat_at))
    return [
        (task_from_row(r), r[TaskCol.LOCKED_BY] == owner, running.get(r[TaskCol.ID])) for r in rows
    ]


@READS.handles(HeldRequests)
async def held_requests(reader: Reader, op: HeldRequests) -> list[HeldRequest]:
    """The requests of `op.task_ids`, queued or taken: who holds their steps."""
    rows = await reader.fetch(HELD, (list(dict.fromkeys(op.task_ids)),))
    return [
        HeldRequest(
            task_id=t,
            seq=int(seq),
            lock_epoch=int(epoch),
            taken_by=by,
            suspect=bool(s),
            created_at=utc(at),
            complete_by=utc(until),
        )
        for t, seq, epoch, by, s, at, until in rows
    ]
