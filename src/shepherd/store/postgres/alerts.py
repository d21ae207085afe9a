"""Stored operator alerts on PostgreSQL: the plans of `store.sql.alerts`, pipelined."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.store.ops import AcknowledgeAlert, ListAlerts
from shepherd.store.postgres.batch import WRITES
from shepherd.store.postgres.reader import READS, read
from shepherd.store.sql import alerts
from shepherd.store.sql.dialect import POSTGRES

if TYPE_CHECKING:
    from shepherd.core.alerts import Raised, StoredAlert
    from shepherd.store.postgres.batch import PostgresBatch
    from shepherd.store.postgres.reader import Reader

__all__ = ["acknowledge", "list_alerts", "store_alert"]


async def store_alert(
    batch: PostgresBatch, task_id: str, workflow: str, key: str | None, raised: Raised
) -> None:
    """Queue the insert of the alert a write into `error` raises, at the batch's instant."""
    query = alerts.store_alert(batch, task_id, workflow, key, raised)
    await batch.send(query.sql, query.params)


@WRITES.handles(AcknowledgeAlert)
async def acknowledge(batch: PostgresBatch, ops: Sequence[AcknowledgeAlert]) -> list[object]:
    """Acknowledge alerts: each as stored after (an acknowledged one keeps its first)."""
    return await batch.run(alerts.acknowledge(batch, ops))


# -- reads ---------------------------------------------------------------------
@READS.handles(ListAlerts)
async def list_alerts(reader: Reader, op: ListAlerts) -> list[StoredAlert]:
    """The stored alerts (the open ones only, those of one task only, if asked), newest first."""
    return await read(reader, alerts.list_alerts(POSTGRES, op))
