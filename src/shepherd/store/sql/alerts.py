"""Stored operator alerts, for both backends: raised with a write into `error`, resolved with a good end.

`store_alert` is called by the writes that move a task into `error` (the
supervisor's `apply_effects`, the owner's `fail`), in their transaction and
only once their fenced UPDATE changed the task. It inserts the task's open
alert, or raises the open one again (one open alert per task: a unique
partial index, `alerts_open_task`), and flags the task (`tasks.alerted`).

`resolve` is called by the writes that end a task in any other state (the
owner's `finish` and `fail`) for the flagged tasks only: the owner's write
reads the flag with the columns it reads anyway (its fence's, or its
RETURNING), so a task that never had an alert pays for one boolean and
nothing more. It resolves every alert of the task not resolved yet; the
resolution then waits for the supervisor's leader to tell the sinks
(`unsent_resolutions`, `mark_sent`).

An acknowledgement updates only an open alert, then reads the row in a
statement of its own: the first acknowledgement stands, and a second reads it
back unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.core.alerts import resolution
from shepherd.core.events import EventKind
from shepherd.errors import UnknownAlertError
from shepherd.store.alert_rows import ALERT_COLUMNS, INSERT_COLUMNS, alert_from_row
from shepherd.store.rows import load
from shepherd.store.sql.plan import Query, each, one

if TYPE_CHECKING:
    from shepherd.core.alerts import Raised, StoredAlert
    from shepherd.store.ops import (
        AcknowledgeAlert,
        CountAlerts,
        ListAlerts,
        MarkResolutionsSent,
        UnsentResolutions,
    )
    from shepherd.store.sql.dialect import Dialect
    from shepherd.store.sql.plan import Plan, Writing

__all__ = [
    "acknowledge",
    "count_alerts",
    "list_alerts",
    "mark_sent",
    "resolve",
    "store_alert",
    "unsent_resolutions",
]

# A task's open alert, or the one it has raised again (the partial index's conflict).
_RAISE = (
    f"INSERT INTO alerts ({INSERT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (task_id) WHERE state = 'open' DO UPDATE SET "
    "times_raised = alerts.times_raised + 1, reason = excluded.reason, "
    "failure_count = excluded.failure_count, last_raised_at = excluded.raised_at"
)
_FLAG = "UPDATE tasks SET alerted = TRUE WHERE id = ?"
_CANCELLED_BY = "SELECT detail FROM events WHERE task_id = ? AND kind = ? ORDER BY id DESC LIMIT 1"
_RESOLVE = (
    "UPDATE alerts SET state = 'resolved', resolved_at = ?, resolved_by = ? "
    "WHERE task_id = ? AND state <> 'resolved'"
)
_ACKNOWLEDGE = (
    "UPDATE alerts SET state = 'acknowledged', acknowledged_at = ?, acknowledged_by = ? "
    "WHERE id = ? AND state = 'open'"
)
_GET = f"SELECT {ALERT_COLUMNS} FROM alerts WHERE id = ?"
_UNSENT = (
    f"SELECT {ALERT_COLUMNS} FROM alerts WHERE state = 'resolved' "
    "AND resolution_sent_at IS NULL ORDER BY id LIMIT ?"
)
_MARK_SENT = (
    "UPDATE alerts SET resolution_sent_at = ? WHERE id = ? AND state = 'resolved' "
    "AND resolution_sent_at IS NULL"
)


def store_alert(
    batch: Writing, task_id: str, workflow: str, key: str | None, raised: Raised
) -> list[Query]:
    """The task's alert raised at the batch's instant (a new one, or its open one again), flagged."""
    d = batch.dialect
    params = (task_id, workflow, key, raised.reason, raised.failure_count, batch.now)
    return [Query(d.sql(_RAISE), params, rows=False), Query(d.sql(_FLAG), (task_id,), rows=False)]


def resolve(batch: Writing, ended: Sequence[tuple[str, str]]) -> Plan[None]:
    """Resolve the alerts of flagged tasks that ended well: (task id, the state it ended in).

    A task cancelled names the operator whose cancel led to it, as its last
    `cancel_requested` event recorded them.
    """
    d = batch.dialect
    ended = [(task_id, state) for task_id, state in ended if resolution(state) is not None]
    if not ended:
        return
    cancelled = [task_id for task_id, state in ended if state == "cancelled"]
    by: dict[str, str | None] = {}
    if cancelled:
        kind = str(EventKind.CANCEL_REQUESTED)
        found = yield [Query(d.sql(_CANCELLED_BY), (task_id, kind)) for task_id in cancelled]
        by = {task_id: _by(rows) for task_id, rows in zip(cancelled, found, strict=True)}
    params = [
        (batch.now, resolution(state, cancelled_by=by.get(task_id)), task_id)
        for task_id, state in ended
    ]
    yield [each(d.sql(_RESOLVE), params)]


def _by(rows: list[tuple[object, ...]]) -> str | None:
    """Who asked for a cancel, from its event's detail (None: not recorded)."""
    if not rows:
        return None
    detail = load(str(rows[0][0]))
    who = detail.get("by") if isinstance(detail, dict) else None
    return who if isinstance(who, str) and who else None


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


def mark_sent(batch: Writing, ops: Sequence[MarkResolutionsSent]) -> Plan[list[object]]:
    """Mark resolutions told to the sinks (a mark already made stays)."""
    ids = sorted({alert_id for op in ops for alert_id in op.alert_ids})
    if ids:
        yield [each(batch.dialect.sql(_MARK_SENT), [(batch.now, alert_id) for alert_id in ids])]
    return [None] * len(ops)


# -- reads ---------------------------------------------------------------------
def list_alerts(d: Dialect, op: ListAlerts) -> Plan[list[StoredAlert]]:
    """The stored alerts matching `op`'s filters, newest first (a previous page read oldest first)."""
    where: list[str] = []
    params: list[object] = []
    for condition, value in (
        ("task_id = ?", op.task_id),
        ("state = ?", None if op.state is None else op.state.value),
        ("id < ?", op.before),
        ("id > ?", op.after),
    ):
        if value is not None:
            where.append(condition)
            params.append(value)
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    order = "ASC" if op.after is not None else "DESC"
    query = f"SELECT {ALERT_COLUMNS} FROM alerts{clause} ORDER BY id {order} LIMIT ?"
    rows = yield from one(d.sql(query), (*params, op.limit))
    alerts = [alert_from_row(row, d.instant) for row in rows]
    return alerts[::-1] if op.after is not None else alerts


def count_alerts(d: Dialect, op: CountAlerts) -> Plan[int]:
    """How many alerts are stored (in `op.state` only, if given)."""
    if op.state is None:
        rows = yield from one(d.sql("SELECT count(*) FROM alerts"))
    else:
        rows = yield from one(
            d.sql("SELECT count(*) FROM alerts WHERE state = ?"), (op.state.value,)
        )
    return int(rows[0][0])


def unsent_resolutions(d: Dialect, op: UnsentResolutions) -> Plan[list[StoredAlert]]:
    """Resolved alerts not told to the sinks yet, oldest first."""
    rows = yield from one(d.sql(_UNSENT), (op.limit,))
    return [alert_from_row(row, d.instant) for row in rows]
