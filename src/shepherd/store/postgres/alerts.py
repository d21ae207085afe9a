"""Stored operator alerts: the row a write into `error` inserts, the operator's list and acknowledgement.

`store_alert` is called by the writes that move a task into `error` (the
supervisor's `apply_effects`, the owner's `fail`), in their transaction and
only once their fenced UPDATE changed the task. An acknowledgement updates
only an open alert, then reads the row in a statement of its own: a
concurrent acknowledgement that won is read back, not overwritten.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.errors import UnknownAlertError
from shepherd.store.alert_rows import ALERT_COLUMNS, INSERT_COLUMNS, alert_from_row
from shepherd.store.ops import AcknowledgeAlert, ListAlerts
from shepherd.store.postgres.batch import WRITES
from shepherd.store.postgres.reader import READS
from shepherd.store.postgres.rows import utc

if TYPE_CHECKING:
    from shepherd.core.alerts import Raised, StoredAlert
    from shepherd.store.postgres.batch import PostgresBatch
    from shepherd.store.postgres.reader import Reader

__all__ = ["acknowledge", "list_alerts", "store_alert"]

_INSERT = f"INSERT INTO alerts ({INSERT_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s)"
_ACKNOWLEDGE = (
    "UPDATE alerts SET acknowledged_at = %s, acknowledged_by = %s "
    "WHERE id = %s AND acknowledged_at IS NULL"
)
_GET = f"SELECT {ALERT_COLUMNS} FROM alerts WHERE id = %s"
_LIST = f"SELECT {ALERT_COLUMNS} FROM alerts ORDER BY id DESC LIMIT %s"
_LIST_OPEN = (
    f"SELECT {ALERT_COLUMNS} FROM alerts WHERE acknowledged_at IS NULL ORDER BY id DESC LIMIT %s"
)
_OF_TASK = f"SELECT {ALERT_COLUMNS} FROM alerts WHERE task_id = %s ORDER BY id DESC LIMIT %s"
_OPEN_OF_TASK = (
    f"SELECT {ALERT_COLUMNS} FROM alerts WHERE task_id = %s AND acknowledged_at IS NULL "
    "ORDER BY id DESC LIMIT %s"
)


async def store_alert(
    batch: PostgresBatch, task_id: str, workflow: str, key: str | None, raised: Raised
) -> None:
    """Queue the insert of the alert a write into `error` raises, at the batch's instant."""
    params = (task_id, workflow, key, raised.reason, raised.failure_count, batch.now)
    await batch.send(_INSERT, params)


@WRITES.handles(AcknowledgeAlert)
async def acknowledge(batch: PostgresBatch, ops: Sequence[AcknowledgeAlert]) -> list[object]:
    """Acknowledge alerts: each as stored after (an acknowledged one keeps its first)."""
    cursors = []
    for op in ops:
        await batch.send(_ACKNOWLEDGE, (batch.now, op.by, op.alert_id))
        cursors.append((op.alert_id, await batch.send(_GET, (op.alert_id,))))
    out: list[object] = []
    for alert_id, cursor in cursors:
        row = await cursor.fetchone()
        out.append(UnknownAlertError(alert_id) if row is None else alert_from_row(row, utc))
    return out


# -- reads ---------------------------------------------------------------------
@READS.handles(ListAlerts)
async def list_alerts(reader: Reader, op: ListAlerts) -> list[StoredAlert]:
    """The stored alerts (the open ones only, those of one task only, if asked), newest first."""
    if op.task_id is None:
        rows = await reader.fetch(_LIST_OPEN if op.open_only else _LIST, (op.limit,))
    else:
        query = _OPEN_OF_TASK if op.open_only else _OF_TASK
        rows = await reader.fetch(query, (op.task_id, op.limit))
    return [alert_from_row(row, utc) for row in rows]
