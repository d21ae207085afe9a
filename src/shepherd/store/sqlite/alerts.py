"""Stored operator alerts on SQLite: the plans of `store.sql.alerts`, under the write lock."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.store.ops import (
    AcknowledgeAlert,
    CountAlerts,
    ListAlerts,
    MarkResolutionsSent,
    UnsentResolutions,
)
from shepherd.store.sql import alerts
from shepherd.store.sql.dialect import SQLITE
from shepherd.store.sqlite.batch import READS, WRITES, Reading

if TYPE_CHECKING:
    from shepherd.core.alerts import Raised, StoredAlert
    from shepherd.store.sqlite.batch import SqliteBatch

__all__ = [
    "acknowledge",
    "count_alerts",
    "list_alerts",
    "mark_sent",
    "resolve_alerts",
    "store_alert",
    "unsent_resolutions",
]


def store_alert(
    batch: SqliteBatch, task_id: str, workflow: str, key: str | None, raised: Raised
) -> None:
    """Raise the task's alert at the batch's instant (a new one, or its open one again)."""
    for query in alerts.store_alert(batch, task_id, workflow, key, raised):
        batch.conn.execute(query.sql, query.params)


def resolve_alerts(batch: SqliteBatch, ended: Sequence[tuple[str, str]]) -> None:
    """Resolve the alerts of flagged tasks that ended well: (task id, the state it ended in)."""
    batch.run(alerts.resolve(batch, ended))


@WRITES.handles(AcknowledgeAlert)
def acknowledge(batch: SqliteBatch, ops: Sequence[AcknowledgeAlert]) -> list[object]:
    """Acknowledge alerts: each as stored after (an acknowledged one keeps its first)."""
    return batch.run(alerts.acknowledge(batch, ops))


@WRITES.handles(MarkResolutionsSent)
def mark_sent(batch: SqliteBatch, ops: Sequence[MarkResolutionsSent]) -> list[object]:
    """Mark resolutions told to the sinks (a mark already made stays)."""
    return batch.run(alerts.mark_sent(batch, ops))


# -- reads ---------------------------------------------------------------------
@READS.handles(ListAlerts)
def list_alerts(at: Reading, op: ListAlerts) -> list[StoredAlert]:
    """The stored alerts matching the operation's filters, newest first."""
    return at.run(alerts.list_alerts(SQLITE, op))


@READS.handles(CountAlerts)
def count_alerts(at: Reading, op: CountAlerts) -> int:
    """How many alerts are stored (in one state only, if given)."""
    return at.run(alerts.count_alerts(SQLITE, op))


@READS.handles(UnsentResolutions)
def unsent_resolutions(at: Reading, op: UnsentResolutions) -> list[StoredAlert]:
    """Resolved alerts not told to the sinks yet, oldest first."""
    return at.run(alerts.unsent_resolutions(SQLITE, op))
