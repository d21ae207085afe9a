"""Operator actions on SQLite: the plans of `store.sql.operator_actions`, under the write lock."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.store.ops import CancelTask, RetryTask, WakeTask
from shepherd.store.sql import operator_actions, sleeps
from shepherd.store.sqlite.batch import WRITES

if TYPE_CHECKING:
    from shepherd.store.sqlite.batch import SqliteBatch

__all__ = ["cancel", "retry", "wake"]


@WRITES.handles(RetryTask)
def retry(batch: SqliteBatch, ops: Sequence[RetryTask]) -> list[object]:
    """Put tasks in `error` back to work (and resubmit one step, with a new payload)."""
    return batch.run(operator_actions.retry(batch, ops))


@WRITES.handles(CancelTask)
def cancel(batch: SqliteBatch, ops: Sequence[CancelTask]) -> list[object]:
    """Request cancellation: unended tasks turn `compensating`, their requests go."""
    return batch.run(operator_actions.cancel(batch, ops))


@WRITES.handles(WakeTask)
def wake(batch: SqliteBatch, ops: Sequence[WakeTask]) -> list[object]:
    """Wake sleeping tasks now (`store.sql.sleeps`); refuse those not sleeping."""
    return batch.run(sleeps.wake(batch, ops))
