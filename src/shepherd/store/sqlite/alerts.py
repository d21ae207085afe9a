"""Stored operator alerts: the row a write into `error` inserts, the operator's list and acknowledgement.

`store_alert` is called by the writes that move a task into `error` (the
supervisor's `apply_effects`, the owner's `fail`), in their transaction and
only once their fenced UPDATE changed the task. An acknowledgement runs under
the write lock: the first one stands, a second returns it unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.errors import UnknownAlertError
from shepherd.store.alert_rows import ALERT_COLUMNS, INSERT_COLUMNS, alert_from_row
from shepherd.store.ops import AcknowledgeAlert, ListAlerts
from shepherd.store.rows import unix_instant
from shepherd.store.sqlite.batch import READS, WRITES, Reading

if TYPE_CHECKING:
    from shepherd.core.alerts import Raised, StoredAlert
    from shepherd.store.sqlite.batch import SqliteBatch

__all__ = ["acknowledge", "list_alerts", "store_alert"]

_INSERT = f"INSERT INTO alerts ({INSERT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)"
_ACKNOWLEDGE = (
    "UPDATE alerts SET acknowledged_at = ?, acknowledged_by = ? "
    "WHERE id = ? AND acknowledged_at IS NULL"
)
_GET = f"SELECT {ALERT_COLUMNS} FROM alerts WHERE id = ?"
_LIST = f"SELECT {ALERT_COLUMNS} FROM alerts ORDER BY id DESC LIMIT ?"
_LIST_OPEN = (
    f"SELECT {ALERT_COLUMNS} FROM alerts WHERE acknowledged_at IS NULL ORDER BY id DESC LIMIT ?"
)
_OF_TASK = f"SELECT {ALERT_COLUMNS} FROM alerts WHERE task_id = ? ORDER BY id DESC LIMIT ?"
_OPEN_OF_TASK = (
    f"SELECT {ALERT_COLUMNS} FROM alerts WHERE task_id = ? AND acknowledged_at IS NULL "
    "ORDER BY id DESC LIMIT ?"
)


def store_alert(
    batch: SqliteBatch, task_id: str, workflow: str, key: str | None, raised: Raised
) -> None:
    """Insert the alert a write into `error` raises, at the batch's instant."""
    params = (task_id, workflow, key, raised.reason, raised.failure_count, batch.now)
    batch.conn.execute(_INSERT, params)


@WRITES.handles(AcknowledgeAlert)
def acknowledge(batch: SqliteBatch, ops: Sequence[AcknowledgeAlert]) -> list[object]:
    """Acknowledge alerts: each as stored after (an acknowledged one keeps its first)."""
    conn, now = batch.conn, batch.now
    out: list[object] = []
    for op in ops:
        conn.execute(_ACKNOWLEDGE, (now, op.by, op.alert_id))
        row = conn.execute(_GET, (op.alert_id,)).fetchone()
        out.append(
            UnknownAlertError(op.alert_id) if row is None else alert_from_row(row, unix_instant)
        )
    return out


# -- reads ---------------------------------------------------------------------
@READS.handles(ListAlerts)
def list_alerts(at: Reading, op: ListAlerts) -> list[StoredAlert]:
    """The stored alerts (the open ones only, those of one task only, if asked), newest first."""
    if op.task_id is None:
        rows = at.conn.execute(_LIST_OPEN if op.open_only else _LIST, (op.limit,)).fetchall()
    else:
        query = _OPEN_OF_TASK if op.open_only else _OF_TASK
        rows = at.conn.execute(query, (op.task_id, op.limit)).fetchall()
    return [alert_from_row(row, unix_instant) for row in rows]
