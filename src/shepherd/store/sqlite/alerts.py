"""Stored operator alerts on SQLite: the plans of `store.sql.alerts`, under the write lock."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.store.ops import AcknowledgeAlert, ListAlerts
from shepherd.store.sql import alerts
from shepherd.store.sql.dialect import SQLITE
from shepherd.store.sqlite.batch import READS, WRITES, Reading

if TYPE_CHECKING:
    from shepherd.core.alerts import Raised, StoredAlert
    from shepherd.store.sqlite.batch import SqliteBatch

__all__ = ["acknowledge", "list_alerts", "store_alert"]


def store_alert(
    batch: SqliteBatch, task_id: str, workflow: str, key: str | None, raised: Raised
) -> None:
    """Insert the alert a write into `error` raises, at the batch's instant."""
    query = alerts.store_alert(batch, task_id, workflow, key, raised)
    batch.conn.execute(query.sql, query.params)


@WRITES.handles(AcknowledgeAlert)
def acknowledge(batch: SqliteBatch, ops: Sequence[AcknowledgeAlert]) -> list[object]:
    """Acknowledge alerts: each as stored after (an acknowledged one keeps its first)."""
    return batch.run(alerts.acknowledge(batch, ops))


# -- reads ---------------------------------------------------------------------
@READS.handles(ListAlerts)
def list_alerts(at: Reading, op: ListAlerts) -> list[StoredAlert]:
    """The stored alerts (the open ones only, those of one task only, if asked), newest first."""
    return at.run(alerts.list_alerts(SQLITE, op))
