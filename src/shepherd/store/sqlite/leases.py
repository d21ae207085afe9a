"""Batch handlers for leadership leases and the supervisor's fenced decisions.

A lease row names its holder, an epoch bumped at every change of holder, and
an expiry compared with the batch's clock. A supervisor decision applies only
while its author still holds the lease with the same epoch (`leads`, read
under the write lock, so no new leader can take over mid-transaction) and only
if the task's `lock_epoch` has not moved on. `apply_effects` writes what
`core.effects` makes of a decision, and of a crash verdict (`crashes`), and
stores the alert an escalation raises (`core.alerts`) with it.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from shepherd.core.alerts import on_decision
from shepherd.core.effects import on_supervision
from shepherd.core.records import Lease, Task
from shepherd.store.effect_rows import effect_row
from shepherd.store.ops import AcquireLease, ApplySupervision, ExpiredClaims, ReleaseLease
from shepherd.store.sqlite.alerts import store_alert
from shepherd.store.sqlite.batch import READS, WRITES, Reading
from shepherd.store.sqlite.effects import UPDATE, params, written
from shepherd.store.sqlite.rows import TASK_COLUMNS, task_from_row

if TYPE_CHECKING:
    from shepherd.core.alerts import Raised
    from shepherd.core.effects import TaskEffect
    from shepherd.store.sqlite.batch import EventRow, SqliteBatch

__all__ = ["acquire", "apply_effects", "expired_claims", "leads", "release", "supervise"]

_ACQUIRE = (
    "INSERT INTO leases (name, holder, epoch, expires_at) VALUES (?, ?, 1, ?) "
    "ON CONFLICT (name) DO UPDATE SET "
    "epoch = CASE WHEN leases.holder = excluded.holder THEN leases.epoch "
    "ELSE leases.epoch + 1 END, holder = excluded.holder, "
    "expires_at = excluded.expires_at "
    "WHERE leases.holder = excluded.holder OR leases.expires_at <= ? "
    "RETURNING name, holder, epoch, expires_at"
)
_RELEASE = "UPDATE leases SET expires_at = ? WHERE name = ? AND holder = ?"
_LEADS = "SELECT holder, epoch, expires_at FROM leases WHERE name = ?"
# The task's fence: still claimed, at the lock_epoch the supervisor read.
_SUPERVISED = UPDATE + " WHERE id = ? AND lock_epoch = ? AND locked_by IS NOT NULL"
_EXPIRED = (
    f"SELECT {TASK_COLUMNS} FROM tasks WHERE locked_by IS NOT NULL "
    "AND complete_by < ? ORDER BY complete_by LIMIT ?"
)


def leads(conn: sqlite3.Connection, leader: Lease, now: float) -> bool:
    """Whether `leader` still holds its lease, with the same epoch, unexpired at `now`."""
    lease = conn.execute(_LEADS, (leader.name,)).fetchone()
    return (
        lease is not None
        and (lease["holder"], lease["epoch"]) == (leader.holder, leader.epoch)
        and (lease["expires_at"] > now)
    )


@WRITES.handles(AcquireLease)
def acquire(batch: SqliteBatch, ops: Sequence[AcquireLease]) -> list[object]:
    """Take or renew leases: a Lease, or None while another holder's is unexpired."""
    conn, now = batch.conn, batch.now
    out: list[object] = []
    for op in ops:
        name, holder, ttl = op.name, op.holder, op.ttl
        row = conn.execute(_ACQUIRE, (name, holder, now + ttl, now)).fetchone()
        out.append(
            None
            if row is None
            else Lease(
                name=row["name"],
                holder=row["holder"],
                epoch=row["epoch"],
                expires_at=datetime.fromtimestamp(row["expires_at"], UTC),
            )
        )
    return out


@WRITES.handles(ReleaseLease)
def release(batch: SqliteBatch, ops: Sequence[ReleaseLease]) -> list[object]:
    """Let leases expire now, if their holders still hold them."""
    for op in ops:
        name, holder = op.name, op.holder
        batch.conn.execute(_RELEASE, (batch.now, name, holder))
    return [None] * len(ops)


@WRITES.handles(ApplySupervision)
def supervise(batch: SqliteBatch, ops: Sequence[ApplySupervision]) -> list[object]:
    """Apply supervisor decisions on expired claims: True where the task was changed."""
    now = datetime.fromtimestamp(batch.now, UTC)
    return apply_effects(
        batch,
        [
            (op.task, op.leader, on_supervision(op.decision, now=now), on_decision(op.decision))
            for op in ops
        ],
    )


def apply_effects(
    batch: SqliteBatch, writes: Sequence[tuple[Task, Lease, TaskEffect, Raised | None]]
) -> list[object]:
    """Write supervisor effects (decisions, crash verdicts), each on its task by its leader.

    Each is fenced twice: its leader must still lead, and the task must still
    be claimed at the `lock_epoch` the supervisor read. A write that raises an
    alert (an escalation) stores it with the task, only where the task changed.

    Returns:
        True where the task was changed, False where a fence stopped the write.
    """
    conn, now = batch.conn, batch.now
    out: list[object] = []
    events: list[EventRow] = []
    for task, leader, effect, alert in writes:
        if not leads(conn, leader, now):
            out.append(False)  # no longer the leader: fenced off
            continue
        row = effect_row(task.id, effect, batch)
        cursor = conn.execute(_SUPERVISED, (*params(row, now), task.id, task.lock_epoch))
        if cursor.rowcount == 0:
            out.append(False)  # the task moved on
            continue
        events.append(written(batch, row, task.key, task.reply_to))
        if alert is not None:
            store_alert(batch, task.id, task.workflow, task.key, alert)
        out.append(True)
    batch.events(events)
    return out


# -- reads ---------------------------------------------------------------------
@READS.handles(ExpiredClaims)
def expired_claims(at: Reading, op: ExpiredClaims) -> list[Task]:
    """Claimed tasks whose complete_by has passed, earliest first."""
    conn, now = at.conn, at.now
    return [task_from_row(r) for r in conn.execute(_EXPIRED, (now, op.limit)).fetchall()]
