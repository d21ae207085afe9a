"""Leadership leases and the supervisor's fenced decisions, for both backends.

A lease row names its holder, an epoch bumped at every change of holder, and
an expiry compared with the batch's clock (taken in SQL: a renewal need not
wait for PostgreSQL's clock). A supervisor decision applies only while its
author still holds the lease with the same epoch (checked in the same
statement, `FOR SHARE` on PostgreSQL, so no new leader can take over
mid-transaction) and only if the task's `lock_epoch` has not moved on (the
task's row taken with SKIP LOCKED on PostgreSQL: a row held by another session,
its owner mid-write or a host cut off mid-transaction, is left for the next
scan rather than waited for). `apply_effects` writes what `core.effects` makes
of a decision, and of a crash verdict (`crashes`), and stores the alert an
escalation raises (`core.alerts`) with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.core.alerts import on_decision
from shepherd.core.effects import on_supervision
from shepherd.core.records import Task
from shepherd.core.timing import on_deadline
from shepherd.payloads import dumps_detail
from shepherd.store import signals as ch
from shepherd.store.effect_rows import UPDATE, effect_row, update_params
from shepherd.store.rows import LEASE_COLUMNS, TASK_COLUMNS
from shepherd.store.sql import children
from shepherd.store.sql.alerts import store_alert
from shepherd.store.sql.plan import Query, each, first, one

if TYPE_CHECKING:
    from datetime import datetime

    from shepherd.core.alerts import Raised
    from shepherd.core.effects import TaskEffect
    from shepherd.core.records import Lease
    from shepherd.store.effect_rows import EffectRow
    from shepherd.store.ops import (
        AcquireLease,
        ApplySupervision,
        CancelOverdue,
        ExpiredClaims,
        GetLease,
        ReleaseLease,
    )
    from shepherd.store.sql.dialect import Dialect
    from shepherd.store.sql.plan import Plan, Writing

__all__ = [
    "acquire",
    "apply_effects",
    "cancel_overdue",
    "expired_claims",
    "get_lease",
    "next_deadline",
    "release",
    "supervise",
]

# (name, holder, now, ttl, now)
_ACQUIRE = (
    "INSERT INTO leases (name, holder, epoch, expires_at) "
    "VALUES (?, ?, 1, {now} + ?{float}{seconds}) ON CONFLICT (name) DO UPDATE SET "
    "epoch = CASE WHEN leases.holder = excluded.holder THEN leases.epoch "
    "ELSE leases.epoch + 1 END, holder = excluded.holder, expires_at = excluded.expires_at "
    "WHERE leases.holder = excluded.holder OR leases.expires_at <= {now} "
    f"RETURNING {LEASE_COLUMNS}"
)
_RELEASE = "UPDATE leases SET expires_at = ? WHERE name = ? AND holder = ?"
_LEASE = f"SELECT {LEASE_COLUMNS} FROM leases WHERE name = ?"
# The fence of every supervisor write: the task's epoch, then the leadership.
_SUPERVISED = (
    UPDATE + " WHERE id = (SELECT id FROM tasks WHERE id = ? AND lock_epoch = ? "
    "AND locked_by IS NOT NULL{skip_locked}) "
    "AND EXISTS (SELECT 1 FROM leases WHERE name = ? AND holder = ? AND epoch = ? "
    "AND expires_at > ?{for_share}) RETURNING id"
)
# The requests of the tasks written. On PostgreSQL a request row held by another
# session (an agent replying) is skipped: its reply carries the old epoch, which
# the scheduler discards.
_DROP_REQUESTS = {
    "sqlite": "DELETE FROM requests WHERE task_id {list}",
    "postgres": "DELETE FROM requests WHERE id = ANY(ARRAY(SELECT id FROM requests "
    "WHERE task_id {list} FOR UPDATE SKIP LOCKED))",
}
# The leadership a write of the supervisor's needs, held while it writes.
_LEADS = (
    "SELECT 1 FROM leases WHERE name = ? AND holder = ? AND epoch = ? "
    "AND expires_at > {now}{for_share}"
)
# Tasks whose deadline passed while pending or processing (the partial index
# `tasks_deadline`), earliest first; on PostgreSQL a row another session holds
# (its owner mid-write) waits for the next scan.
_OVERDUE = (
    f"SELECT {TASK_COLUMNS} FROM tasks{{by_deadline}} WHERE deadline IS NOT NULL "
    "AND deadline <= {now} "
    "AND process_state IN ('pending', 'processing') ORDER BY deadline LIMIT ?{skip_locked}"
)
# A passed deadline's effect (`core.timing.on_deadline`): cancelled as an operator
# cancels, released, claimable now, the old owner fenced off by the new epoch.
_CANCEL_OVERDUE = (
    "UPDATE tasks SET process_state = ?, cancel_requested = ?, error = coalesce(error, ?), "
    "failure_count = 0, locked_by = NULL, lock_epoch = lock_epoch + 1, complete_by = NULL, "
    "not_before = {now}, updated_at = {now} "
    f"WHERE id = ? AND process_state IN ('pending', 'processing') RETURNING {TASK_COLUMNS}"
)
_NEXT_DEADLINE = (
    "SELECT min(deadline) FROM tasks{by_deadline} WHERE deadline IS NOT NULL "
    "AND process_state IN ('pending', 'processing')"
)
_EXPIRED = (
    f"SELECT {TASK_COLUMNS} FROM tasks WHERE locked_by IS NOT NULL "
    "AND complete_by < {now} ORDER BY complete_by LIMIT ?"
)


def acquire(batch: Writing, ops: Sequence[AcquireLease]) -> Plan[list[object]]:
    """Take or renew leases: a Lease, or None while another holder's is unexpired."""
    d, now = batch.dialect, batch.instant
    sql = d.sql(_ACQUIRE)
    found = yield [Query(sql, (op.name, op.holder, now, op.ttl, now)) for op in ops]
    return [d.records.lease(rows[0]) if rows else None for rows in found]


def release(batch: Writing, ops: Sequence[ReleaseLease]) -> Plan[list[object]]:
    """Let leases expire now, if their holders still hold them."""
    yield [each(batch.dialect.sql(_RELEASE), [(batch.now, op.name, op.holder) for op in ops])]
    return [None] * len(ops)


def supervise(batch: Writing, ops: Sequence[ApplySupervision]) -> Plan[list[object]]:
    """Apply supervisor decisions on expired claims: True where the task was changed."""
    now = batch.dialect.instant(batch.now)
    writes = [
        (op.task, op.leader, on_supervision(op.decision, now=now), on_decision(op.decision))
        for op in ops
    ]
    return (yield from apply_effects(batch, writes))


def apply_effects(
    batch: Writing, writes: Sequence[tuple[Task, Lease, TaskEffect, Raised | None]]
) -> Plan[list[object]]:
    """Write supervisor effects (decisions, crash verdicts), each on its task by its leader.

    Each is fenced twice: its leader must still lead, and the task must still
    be claimed at the `lock_epoch` the supervisor read. All are sent, then all
    are read. A write that raises an alert (an escalation) stores it with the
    task, only where the task changed.

    Returns:
        True where the task was changed, False where a fence stopped the write.
    """
    d, now = batch.dialect, batch.now
    sql = d.sql(_SUPERVISED)
    sent: list[tuple[Task, EffectRow, Raised | None]] = []
    queries: list[Query] = []
    for task, leader, effect, alert in writes:
        row = effect_row(task.id, effect, batch)
        fence = (task.id, task.lock_epoch, leader.name, leader.holder, leader.epoch, now)
        queries.append(Query(sql, (*update_params(d, row, now), *fence)))
        sent.append((task, row, alert))
    found = yield queries
    out: list[object] = []
    dropped: list[str] = []
    after: list[Query] = []
    for (task, row, alert), rows in zip(sent, found, strict=True):
        if not rows:
            out.append(False)  # the task moved on, or its author no longer leads
            continue
        batch.event(row.task_id, task.key, task.reply_to, row.event, row.detail)
        batch.rings.update(row.rings)
        if alert is not None:
            after.extend(store_alert(batch, task.id, task.workflow, task.key, alert))
        if row.drop_requests:
            dropped.append(task.id)
        out.append(True)
    for chunk in d.chunks(dropped):
        sql, listed = d.listed(_DROP_REQUESTS[d.name], chunk)
        after.append(Query(sql, listed, rows=False))
    if after:
        yield after
    return out


def cancel_overdue(batch: Writing, ops: Sequence[CancelOverdue]) -> Plan[list[object]]:
    """Cancel the tasks whose deadline passed, while the op's leader still leads.

    Each task found is held (PostgreSQL: `FOR UPDATE SKIP LOCKED`; SQLite: the
    write lock) and written as `core.timing.on_deadline` decides, with its
    `cancel_requested` event; its queued requests go. Returns, per operation,
    the tasks cancelled (none if its leader no longer leads).
    """
    d, now = batch.dialect, batch.instant
    out: list[object] = []
    for op in ops:
        leader = op.leader
        leads, found = yield [
            Query(d.sql(_LEADS), (leader.name, leader.holder, leader.epoch, now)),
            Query(d.sql(_OVERDUE), (now, d.limit(op.limit))),
        ]
        if not leads or not found:
            out.append([])
            continue
        cancelled: list[Task] = []
        for row in found:
            task = d.records.task(row)
            assert task.deadline is not None  # selected by it
            effect = on_deadline(task.deadline)
            params = (
                str(effect.process_state),
                True,
                batch.dumps(effect.error),
                now,
                now,
                task.id,
            )
            updated = yield from first(d.sql(_CANCEL_OVERDUE), params)
            if updated is None:  # ended meanwhile (SQLite: not possible under the lock)
                continue
            batch.event(task.id, task.key, task.reply_to, effect.event, dumps_detail(effect.detail))
            cancelled.append(d.records.task(updated))
        for chunk in d.chunks([t.id for t in cancelled]):
            sql, listed = d.listed(_DROP_REQUESTS[d.name], chunk)
            yield [Query(sql, listed, rows=False)]
        if cancelled:
            batch.rings.add(ch.TASKS)
            # Their unended children (and theirs) are cancelled with them (`core.children`).
            yield from children.cancel_children(batch, [t.id for t in cancelled], everything=True)
        out.append(cancelled)
    return out


# -- reads ---------------------------------------------------------------------
def expired_claims(d: Dialect, now: object, op: ExpiredClaims) -> Plan[list[Task]]:
    """Claimed tasks whose complete_by has passed, earliest first."""
    rows = yield from one(d.sql(_EXPIRED), (now, d.limit(op.limit)))
    return [d.records.task(row) for row in rows]


def next_deadline(d: Dialect) -> Plan[datetime | None]:
    """The earliest deadline of the tasks `cancel_overdue` would cancel, or None."""
    row = yield from first(d.sql(_NEXT_DEADLINE))
    return None if row is None or row[0] is None else d.instant(row[0])


def get_lease(d: Dialect, op: GetLease) -> Plan[Lease | None]:
    """The named lease as stored, or None."""
    row = yield from first(d.sql(_LEASE), (op.name,))
    return None if row is None else d.records.lease(row)
