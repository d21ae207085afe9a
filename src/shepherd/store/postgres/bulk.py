"""Triage in bulk on PostgreSQL: the plans of `store.sql.bulk`, pipelined.

A retry locks each task row (`FOR UPDATE`) before it checks its state.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.store.ops import (
    AcknowledgeAlertsOf,
    CountMatchingTasks,
    FindBulkReply,
    MatchingTaskIds,
    RetryTasks,
)
from shepherd.store.postgres.batch import WRITES
from shepherd.store.postgres.reader import READS, read
from shepherd.store.sql import bulk
from shepherd.store.sql.dialect import POSTGRES

if TYPE_CHECKING:
    from shepherd.store.ops import StoredReply
    from shepherd.store.postgres.batch import PostgresBatch
    from shepherd.store.postgres.reader import Reader

__all__ = ["acknowledge_alerts_of", "count_matching", "find_reply", "matching_ids", "retry_tasks"]


@WRITES.handles(RetryTasks)
async def retry_tasks(batch: PostgresBatch, ops: Sequence[RetryTasks]) -> list[object]:
    """Put many `error` tasks back to work, each from its failed step; one outcome per operation."""
    return await batch.run(bulk.retry_tasks(batch, ops))


@WRITES.handles(AcknowledgeAlertsOf)
async def acknowledge_alerts_of(
    batch: PostgresBatch, ops: Sequence[AcknowledgeAlertsOf]
) -> list[object]:
    """Acknowledge many tasks' open alerts; one outcome per operation."""
    return await batch.run(bulk.acknowledge_alerts_of(batch, ops))


# -- reads ---------------------------------------------------------------------
@READS.handles(CountMatchingTasks)
async def count_matching(reader: Reader, op: CountMatchingTasks) -> int:
    """The count of the tasks matching the listing's filters, capped at its limit."""
    return await read(reader, bulk.count_matching(POSTGRES, op))


@READS.handles(MatchingTaskIds)
async def matching_ids(reader: Reader, op: MatchingTaskIds) -> list[str]:
    """The listing's task ids, newest first."""
    return await read(reader, bulk.matching_ids(POSTGRES, op))


@READS.handles(FindBulkReply)
async def find_reply(reader: Reader, op: FindBulkReply) -> StoredReply | None:
    """The first use of an idempotency key, and the outcome it replays."""
    return await read(reader, bulk.find_reply(POSTGRES, op))
