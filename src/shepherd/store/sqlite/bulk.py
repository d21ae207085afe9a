"""Triage in bulk on SQLite: the plans of `store.sql.bulk`, the writes under the write lock."""

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
from shepherd.store.sql import bulk
from shepherd.store.sql.dialect import SQLITE
from shepherd.store.sqlite.batch import READS, WRITES, Reading

if TYPE_CHECKING:
    from shepherd.store.ops import StoredReply
    from shepherd.store.sqlite.batch import SqliteBatch

__all__ = ["acknowledge_alerts_of", "count_matching", "find_reply", "matching_ids", "retry_tasks"]


@WRITES.handles(RetryTasks)
def retry_tasks(batch: SqliteBatch, ops: Sequence[RetryTasks]) -> list[object]:
    """Retry many tasks in `error`, each from its failed step; one outcome per operation."""
    return batch.run(bulk.retry_tasks(batch, ops))


@WRITES.handles(AcknowledgeAlertsOf)
def acknowledge_alerts_of(batch: SqliteBatch, ops: Sequence[AcknowledgeAlertsOf]) -> list[object]:
    """Acknowledge the open alerts of many tasks; one outcome per operation."""
    return batch.run(bulk.acknowledge_alerts_of(batch, ops))


# -- reads ---------------------------------------------------------------------
@READS.handles(CountMatchingTasks)
def count_matching(at: Reading, op: CountMatchingTasks) -> int:
    """How many tasks match the listing's filters, up to its limit."""
    return at.run(bulk.count_matching(SQLITE, op))


@READS.handles(MatchingTaskIds)
def matching_ids(at: Reading, op: MatchingTaskIds) -> list[str]:
    """The ids of the tasks the listing lists, newest first."""
    return at.run(bulk.matching_ids(SQLITE, op))


@READS.handles(FindBulkReply)
def find_reply(at: Reading, op: FindBulkReply) -> StoredReply | None:
    """What an idempotency key was first used for, and its outcome."""
    return at.run(bulk.find_reply(SQLITE, op))
