"""Operator actions on PostgreSQL: the plans of `store.sql.operator_actions`.

Each locks its task row first (`FOR UPDATE`), then checks its state.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.store.ops import CancelTask, RetryTask, WakeTask
from shepherd.store.postgres.batch import WRITES
from shepherd.store.sql import operator_actions, sleeps

if TYPE_CHECKING:
    from shepherd.store.postgres.batch import PostgresBatch

__all__ = ["cancel", "retry", "wake"]


@WRITES.handles(RetryTask)
async def retry(batch: PostgresBatch, ops: Sequence[RetryTask]) -> list[object]:
    """Put `error` tasks back to work from their failed step (or step `seq`)."""
    return await batch.run(operator_actions.retry(batch, ops))


@WRITES.handles(CancelTask)
async def cancel(batch: PostgresBatch, ops: Sequence[CancelTask]) -> list[object]:
    """Ask for compensation of tasks that have not ended; they end `cancelled`."""
    return await batch.run(operator_actions.cancel(batch, ops))


@WRITES.handles(WakeTask)
async def wake(batch: PostgresBatch, ops: Sequence[WakeTask]) -> list[object]:
    """Wake sleeping tasks now (`store.sql.sleeps`); refuse those not sleeping."""
    return await batch.run(sleeps.wake(batch, ops))
