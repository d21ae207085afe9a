"""Heartbeats and done keys on PostgreSQL: the plans of `store.sql.keys`, pipelined.

A heartbeat locks its task row first (`FOR UPDATE`, fenced by `lock_epoch`), as
every other writer of a task does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.store.ops import AbandonOnce, BeginOnce, ExtendStep, FinishOnce
from shepherd.store.postgres.batch import WRITES
from shepherd.store.sql import keys

if TYPE_CHECKING:
    from shepherd.store.postgres.batch import PostgresBatch

__all__ = ["abandon_once", "begin_once", "extend_step", "finish_once"]


@WRITES.handles(ExtendStep)
async def extend_step(batch: PostgresBatch, ops: Sequence[ExtendStep]) -> list[object]:
    """Heartbeats: move the deadlines of current executions one window ahead."""
    return await batch.run(keys.extend_step(batch, ops))


@WRITES.handles(BeginOnce)
async def begin_once(batch: PostgresBatch, ops: Sequence[BeginOnce]) -> list[object]:
    """Mark keys started, or say how an earlier execution left them."""
    return await batch.run(keys.begin_once(batch, ops))


@WRITES.handles(FinishOnce)
async def finish_once(batch: PostgresBatch, ops: Sequence[FinishOnce]) -> list[object]:
    """Record effects' results on their holders' started marks."""
    return await batch.run(keys.finish_once(batch, ops))


@WRITES.handles(AbandonOnce)
async def abandon_once(batch: PostgresBatch, ops: Sequence[AbandonOnce]) -> list[object]:
    """Delete holders' started marks (their effects did not happen)."""
    return await batch.run(keys.abandon_once(batch, ops))
