"""Operator actions on SQLite: the plans of `store.sql.operator_actions`, under the write lock."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.store.ops import CancelTask, RetryTask
from shepherd.store.sql import operator_actions
from shepherd.store.sqlite.batch import WRITES

if TYPE_CHECKING:
    from shepherd.store.sqlite.batch import SqliteBatch

__all__ = ["cancel", "retry"]


@WRITES.handles(RetryTask)
def retry(batch: SqliteBatch, ops: Sequence[RetryTask]) -> list[object]:
    """Put tasks in `error` back to work (and resubmit one step, with a new payload)."""
    return batch.run(operator_actions.retry(batch, ops))


@WRITES.handles(CancelTask)
def cancel(batch: SqliteBatch, ops: Sequence[CancelTask]) -> list[object]:
    """Request cancellation: unended tasks turn `compensating`, their requests go."""
    return batch.run(operator_actions.cancel(batch, ops))
