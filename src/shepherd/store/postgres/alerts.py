"""Stored operator alerts on PostgreSQL: the plans of `store.sql.alerts`, pipelined."""

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
from shepherd.store.postgres.batch import WRITES
from shepherd.store.postgres.reader import READS, read
from shepherd.store.sql import alerts
from shepherd.store.sql.dialect import POSTGRES

if TYPE_CHECKING:
    from shepherd.core.alerts import Raised, StoredAlert
    from shepherd.store.postgres.batch import PostgresBatch
    from shepherd.store.postgres.reader import Reader

__all__ = [
    "acknowledge",
    "count_alerts",
    "list_alerts",
    "mark_resolutions_sent",
    "resolve_alerts",
    "store_alert",
    "unsent_resolutions",
]


@WRITES.handles(AcknowledgeAlert)
async def acknowledge(batch: PostgresBatch, ops: Sequence[AcknowledgeAlert]) -> list[object]:
    """Acknowledge alerts: each as stored after (an acknowledged one keeps its first)."""
    return await batch.run(alerts.acknowledge(batch, ops))


@WRITES.handles(MarkResolutionsSent)
async def mark_resolutions_sent(
    batch: PostgresBatch, ops: Sequence[MarkResolutionsSent]
) -> list[object]:
    """Mark resolutions told to the sinks (a mark already made stays)."""
    return await batch.run(alerts.mark_sent(batch, ops))


# -- in the writes that move a task into `error`, or end it ---------------------
async def store_alert(
    batch: PostgresBatch, task_id: str, workflow: str, key: str | None, raised: Raised
) -> None:
    """Queue the task's alert, raised at the batch's instant (a new one, or its open one again)."""
    for query in alerts.store_alert(batch, task_id, workflow, key, raised):
        await batch.send(query.sql, query.params)


async def resolve_alerts(batch: PostgresBatch, ended: Sequence[tuple[str, str]]) -> None:
    """Resolve the alerts of flagged tasks that ended well: (task id, the state it ended in)."""
    await batch.run(alerts.resolve(batch, ended))


# -- reads ---------------------------------------------------------------------
@READS.handles(ListAlerts)
async def list_alerts(reader: Reader, op: ListAlerts) -> list[StoredAlert]:
    """The stored alerts matching the operation's filters, newest first."""
    return await read(reader, alerts.list_alerts(POSTGRES, op))


@READS.handles(CountAlerts)
async def count_alerts(reader: Reader, op: CountAlerts) -> int:
    """How many alerts are stored (in one state only, if given)."""
    return await read(reader, alerts.count_alerts(POSTGRES, op))


@READS.handles(UnsentResolutions)
async def unsent_resolutions(reader: Reader, op: UnsentResolutions) -> list[StoredAlert]:
    """Resolved alerts not told to the sinks yet, oldest first."""
    return await read(reader, alerts.unsent_resolutions(POSTGRES, op))
