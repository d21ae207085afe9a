"""Batch handlers for leadership leases and the supervisor's fenced decisions.

A lease row names its holder, an epoch bumped at every change of holder, and
an expiry compared with the batch's (database) clock. A supervisor decision
applies only while its author still holds the lease with the same epoch
(checked under `FOR SHARE`, so no new leader can take over mid-transaction)
and only if the task's `lock_epoch` has not moved on.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

from shepherd.core.events import EventKind
from shepherd.core.records import Task
from shepherd.store import signals as ch
from shepherd.store.ops import AcquireLease, ApplySupervision, ExpiredClaims, ReleaseLease
from shepherd.store.postgres.batch import WRITES
from shepherd.store.postgres.reader import READS
from shepherd.store.postgres.rows import TASK_COLUMNS, lease_from_row, task_from_row
from shepherd.store.postgres.tasks import limit_of

if TYPE_CHECKING:
    from shepherd.store.postgres.batch import Batch
    from shepherd.store.postgres.reader import Reader

__all__ = ["acquire", "release", "supervise"]

_ACQUIRE = (
    "INSERT INTO leases AS l (name, holder, epoch, expires_at) VALUES (%s, %s, 1, %s) "
    "ON CONFLICT (name) DO UPDATE SET "
    "epoch = CASE WHEN l.holder = excluded.holder THEN l.epoch ELSE l.epoch + 1 END, "
    "holder = excluded.holder, expires_at = excluded.expires_at "
    "WHERE l.holder = excluded.holder OR l.expires_at <= %s "
    "RETURNING name, holder, epoch, expires_at"
)
_RELEASE = "UPDATE leases SET expires_at = %s WHERE name = %s AND holder = %s"
# Appended to every decision's UPDATE: the task's epoch, then the leadership.
# The task row is taken with SKIP LOCKED: a row held by another session (its owner
# mid-write, or a host cut off mid-transaction) is left for the next scan rather
# than waited for, so one held row never stalls the recovery of the others.
_FENCED = (
    " WHERE id = (SELECT id FROM tasks WHERE id = %s AND lock_epoch = %s "
    "AND locked_by IS NOT NULL FOR UPDATE SKIP LOCKED) "
    "AND EXISTS (SELECT 1 FROM leases WHERE name = %s AND holder = %s AND epoch = %s "
    "AND expires_at > %s FOR SHARE) RETURNING id"
)
_RESET = (
    "UPDATE tasks SET locked_by = NULL, lock_epoch = lock_epoch + 1, complete_by = NULL, "
    "process_state = %s, failure_count = %s, not_before = %s, updated_at = %s" + _FENCED
)
_ESCALATE = (
    "UPDATE tasks SET locked_by = NULL, lock_epoch = lock_epoch + 1, complete_by = NULL, "
    "process_state = 'error', failure_count = %s, error = %s, updated_at = %s" + _FENCED
)
_COMPENSATE = (
    "UPDATE tasks SET locked_by = NULL, lock_epoch = lock_epoch + 1, complete_by = NULL, "
    "process_state = 'compensating', failure_count = %s, error = %s, not_before = %s, "
    "updated_at = %s" + _FENCED
)
# A request row held by another session (an agent replying) is skipped: its reply
# carries the old epoch, which the scheduler discards.
_DROP_REQUESTS = (
    "DELETE FROM requests WHERE id IN (SELECT id FROM requests "
    "WHERE task_id = ANY(%s::text[]) FOR UPDATE SKIP LOCKED)"
)


@WRITES.handles(AcquireLease)
async def acquire(batch: Batch, ops: Sequence[AcquireLease]) -> list[object]:
    """Take or renew leases; None where someone else holds an unexpired one."""
    now = batch.now
    cursors = [
        await batch.send(_ACQUIRE, (op.name, op.holder, now + timedelta(seconds=op.ttl), now))
        for op in ops
    ]
    out: list[object] = []
    for cursor in cursors:
        row = await cursor.fetchone()
        out.append(None if row is None else lease_from_row(row))
    return out


@WRITES.handles(ReleaseLease)
async def release(batch: Batch, ops: Sequence[ReleaseLease]) -> list[object]:
    """Expire leases now, if the caller still holds them."""
    for op in ops:
        name, holder = op.name, op.holder
        await batch.send(_RELEASE, (batch.now, name, holder))
    return [None] * len(ops)


@WRITES.handles(ApplySupervision)
async def supervise(batch: Batch, ops: Sequence[ApplySupervision]) -> list[object]:
    """Apply supervisor decisions, fenced by task epoch and leadership."""
    from shepherd.core.supervision import Compensate, Escalate, Reset

    now = batch.now
    sent = []
    for op in ops:
        task, decision, leader = op.task, op.decision, op.leader
        fence = (task.id, task.lock_epoch, leader.name, leader.holder, leader.epoch, now)
        if isinstance(decision, Reset):
            cursor = await batch.send(
                _RESET,
                (
                    str(decision.process_state),
                    decision.failure_count,
                    decision.not_before,
                    now,
                    *fence,
                ),
            )
            kind = EventKind.RESET
            detail = {"reason": decision.reason, "failure_count": decision.failure_count}
        elif isinstance(decision, Escalate):
            error = batch.dumps_error({"reason": decision.reason})
            cursor = await batch.send(_ESCALATE, (decision.failure_count, error, now, *fence))
            kind = EventKind.ERROR
            detail = {
                "error": {"reason": decision.reason},
                "failure_count": decision.failure_count,
            }
        elif isinstance(decision, Compensate):
            error = batch.dumps_error({"reason": decision.reason})
            cursor = await batch.send(
                _COMPENSATE, (decision.failure_count, error, now, now, *fence)
            )
            kind, detail = EventKind.COMPENSATING, {"error": {"reason": decision.reason}}
        else:  # pragma: no cover - the Decision union is closed
            raise TypeError(f"unknown decision {decision!r}")
        sent.append((task, kind, detail, cursor))
    out: list[object] = []
    applied: list[str] = []
    for task, kind, detail, cursor in sent:
        if await cursor.fetchone() is None:
            out.append(False)  # the task moved on, or we are no longer the leader
            continue
        applied.append(task.id)
        batch.event(task.id, task.key, task.reply_to, kind, batch.dumps_error(detail))
        batch.rings.add(ch.TASKS)
        if kind == EventKind.ERROR:
            batch.rings.add(ch.task_channel(task.id))
        out.append(True)
    if applied:
        await batch.send(_DROP_REQUESTS, (applied,))
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
