"""Heartbeats and done keys on SQLite: the plans of `store.sql.keys`, under the write lock."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.store.ops import AbandonOnce, BeginOnce, ExtendStep, FinishOnce
from shepherd.store.sql import keys
from shepherd.store.sqlite.batch import WRITES

if TYPE_CHECKING:
    from shepherd.store.sqlite.batch import SqliteBatch

__all__ = ["abandon_once", "begin_once", "extend_step", "finish_once"]


@WRITES.handles(ExtendStep)
def extend_step(batch: SqliteBatch, ops: Sequence[ExtendStep]) -> list[object]:
    """Heartbeats: move the deadlines of current executions one window ahead."""
    return batch.run(keys.extend_step(batch, ops))


@WRITES.handles(BeginOnce)
def begin_once(batch: SqliteBatch, ops: Sequence[BeginOnce]) -> list[object]:
    """Mark keys started, or say how an earlier execution left them."""
    return batch.run(keys.begin_once(batch, ops))


@WRITES.handles(FinishOnce)
def finish_once(batch: SqliteBatch, ops: Sequence[FinishOnce]) -> list[object]:
    """Record effects' results on their holders' started marks."""
    return batch.run(keys.finish_once(batch, ops))


@WRITES.handles(AbandonOnce)
def abandon_once(batch: SqliteBatch, ops: Sequence[AbandonOnce]) -> list[object]:
    """Delete holders' started marks (their effects did not happen)."""
    return batch.run(keys.abandon_once(batch, ops))
