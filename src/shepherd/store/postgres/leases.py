"""Batch handlers for leadership leases and the supervisor's fenced decisions.

A lease row names its holder, an epoch bumped at every change of holder, and
an expiry compared with the batch's (database) clock. A supervisor decision
applies only while its author still holds the lease with the same epoch
(checked under `FOR SHARE`, so no new leader can take over mid-transaction)
and only if the task's `lock_epoch` has not moved on. `apply_effects` writes
what `core.effects` makes of a decision, and of a crash verdict (`crashes`),
and stores the alert an escalation raises (`core.alerts`) with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.core.alerts import on_decision
from shepherd.core.effects import on_supervision
from shepherd.core.records import Task
from shepherd.store.effect_rows import effect_row
from shepherd.store.ops import AcquireLease, ApplySupervision, ExpiredClaims, ReleaseLease
from shepherd.store.postgres.alerts import store_alert
from shepherd.store.postgres.batch import INSTANT, WRITES
from shepherd.store.postgres.effects import UPDATE, params, written
from shepherd.store.postgres.reader import READS
from shepherd.store.postgres.rows import TASK_COLUMNS, lease_from_row, task_from_row
from shepherd.store.postgres.tasks import limit_of

if TYPE_CHECKING:
    from shepherd.core.alerts import Raised
    from shepherd.core.effects import TaskEffect
    from shepherd.core.records import Lease
    from shepherd.store.postgres.batch import PostgresBatch
    from shepherd.store.postgres.reader import Reader

__all__ = ["acquire", "apply_effects", "release", "supervise"]

# The batch's instant in SQL (`INSTANT`): a renewal need not wait for the clock.
_ACQUIRE = (
    "INSERT INTO leases AS l (name, holder, epoch, expires_at) "
    f"VALUES (%s, %s, 1, {INSTANT} + %s::float8 * interval '1 second') "
    "ON CONFLICT (name) DO UPDATE SET "
    "epoch = CASE WHEN l.holder = excluded.holder THEN l.epoch ELSE l.epoch + 1 END, "
    "holder = excluded.holder, expires_at = excluded.expires_at "
    f"WHERE l.holder = excluded.holder OR l.expires_at <= {INSTANT} "
    "RETURNING name, holder, epoch, expires_at"
)
_RELEASE = "UPDATE leases SET expires_at = %s WHERE name = %s AND holder = %s"
# The fence of every supervisor write: the task's epoch, then the leadership.
# The task row is taken with SKIP LOCKED: a row held by another session (its owner
# mid-write, or a host cut off mid-transaction) is left for the next scan rather
# than waited for, so one held row never stalls the recovery of the others.
_FENCED = (
    " WHERE id = (SELECT id FROM tasks WHERE id = %s AND lock_epoch = %s "
    "AND locked_by IS NOT NULL FOR UPDATE SKIP LOCKED) "
    "AND EXISTS (SELECT 1 FROM leases WHERE name = %s AND holder = %s AND epoch = %s "
    "AND expires_at > %s FOR SHARE) RETURNING id"
)
_SUPERVISED = UPDATE + _FENCED
# A request row held by another session (an agent replying) is skipped: its reply
# carries the old epoch, which the scheduler discards.
_DROP_REQUESTS = (
    "DELETE FROM requests WHERE id = ANY(ARRAY(SELECT id FROM requests "
    "WHERE task_id = ANY(%s::text[]) FOR UPDATE SKIP LOCKED))"
)


@WRITES.handles(AcquireLease)
async def acquire(batch: PostgresBatch, ops: Sequence[AcquireLease]) -> list[object]:
    """Take or renew leases; None where someone else holds an unexpired one."""
    now = batch.instant
    rows = await batch.first_rows(_ACQUIRE, [(op.name, op.holder, now, op.ttl, now) for op in ops])
    return [None if row is None else lease_from_row(row) for row in rows]


@WRITES.handles(ReleaseLease)
async def release(batch: PostgresBatch, ops: Sequence[ReleaseLease]) -> list[object]:
    """Expire leases now, if the caller still holds them."""
    for op in ops:
        name, holder = op.name, op.holder
        await batch.send(_RELEASE, (batch.now, name, holder))
    return [None] * len(ops)


@WRITES.handles(ApplySupervision)
async def supervise(batch: PostgresBatch, ops: Sequence[ApplySupervision]) -> list[object]:
    """Apply supervisor decisions, fenced by task epoch and leadership."""
    now = batch.now
    return await apply_effects(
        batch,
        [
            (op.task, op.leader, on_supervision(op.decision, now=now), on_decision(op.decision))
            for op in ops
        ],
    )


async def apply_effects(
    batch: PostgresBatch, writes: Sequence[tuple[Task, Lease, TaskEffect, Raised | None]]
) -> list[object]:
    """Write supervisor effects (decisions, crash verdicts), each on its task by its leader.

    Each is fenced twice: its leader must still lead, and the task must still
    be claimed at the `lock_epoch` the supervisor read (a row another session
    holds is skipped). All are sent, then all are read. A write that raises an
    alert (an escalation) stores it with the task, only where the task changed.

    Returns:
        True where the task was changed, False where a fence stopped the write.
    """
    now = batch.now
    sent = []
    for task, leader, effect, alert in writes:
        row = effect_row(task.id, effect, batch)
        fence = (task.id, task.lock_epoch, leader.name, leader.holder, leader.epoch, now)
        cursor = await batch.send(_SUPERVISED, (*params(row, now), *fence))
        sent.append((task, row, alert, cursor))
    out: list[object] = []
    dropped: list[str] = []
    for task, row, alert, cursor in sent:
        if await cursor.fetchone() is None:
            out.append(False)  # the task moved on, or we are no longer the leader
            continue
        written(batch, row, task.key, task.reply_to)
        if alert is not None:
            await store_alert(batch, task.id, task.workflow, task.key, alert)
        if row.drop_requests:
            dropped.append(task.id)
        out.append(True)
    if dropped:
        await batch.send(_DROP_REQUESTS, (dropped,))
    return out


# -- reads ---------------------------------------------------------------------
# NULL means "the database's clock"; a test clock passes its own instant.
_EXPIRED = (
    f"SELECT {TASK_COLUMNS} FROM tasks WHERE locked_by IS NOT NULL "
    "AND complete_by < coalesce(%s::timestamptz, now()) ORDER BY complete_by LIMIT %s"
)


@READS.handles(ExpiredClaims)
async def expired_claims(reader: Reader, op: ExpiredClaims) -> list[Task]:
    """Claimed tasks whose complete_by has passed, earliest first."""
    rows = await reader.fetch(_EXPIRED, (reader.clock_param(), limit_of(op.limit)))
    return [task_from_row(r) for r in rows]
