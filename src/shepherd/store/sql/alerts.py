"""Stored operator alerts, for both backends: the row a write into `error` inserts, the list.

`store_alert` is called by the writes that move a task into `error` (the
supervisor's `apply_effects`, the owner's `fail`), in their transaction and
only once their fenced UPDATE changed the task. An acknowledgement updates
only an open alert, then reads the row in a statement of its own: the first
acknowledgement stands, and a second reads it back unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.errors import UnknownAlertError
from shepherd.store.alert_rows import ALERT_COLUMNS, INSERT_COLUMNS, alert_from_row
from shepherd.store.sql.plan import Query, one

if TYPE_CHECKING:
    from shepherd.core.alerts import Raised, StoredAlert
    from shepherd.store.ops import AcknowledgeAlert, ListAlerts
    from shepherd.store.sql.dialect import Dialect
    from shepherd.store.sql.plan import Plan, Writing

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
    batch: Writing, task_id: str, workflow: str, key: str | None, raised: Raised
) -> Query:
    """The insert of the alert a write into `error` raises, at the batch's instant (not read)."""
    params = (task_id, workflow, key, raised.reason, raised.failure_count, batch.now)
    return Query(batch.dialect.sql(_INSERT), params, rows=False)


def acknowledge(batch: Writing, ops: Sequence[AcknowledgeAlert]) -> Plan[list[object]]:
    """Acknowledge alerts: each as stored after (an acknowledged one keeps its first)."""
    d = batch.dialect
    queries: list[Query] = []
    for op in ops:
        queries.append(Query(d.sql(_ACKNOWLEDGE), (batch.now, op.by, op.alert_id), rows=False))
        queries.append(Query(d.sql(_GET), (op.alert_id,)))
    found = yield queries
    return [
        UnknownAlertError(op.alert_id) if not rows else alert_from_row(rows[0], d.instant)
        for op, rows in zip(ops, found[1::2], strict=True)
    ]


def list_alerts(d: Dialect, op: ListAlerts) -> Plan[list[StoredAlert]]:
    """The stored alerts (the open ones only, those of one task only, if asked), newest first."""
    params: tuple[object, ...]
    if op.task_id is None:
        query, params = _LIST_OPEN if op.open_only else _LIST, (op.limit,)
    else:
        query, params = _OPEN_OF_TASK if op.open_only else _OF_TASK, (op.task_id, op.limit)
    return [alert_from_row(row, d.instant) for row in (yield from one(d.sql(query), params))]
