"""Child workflows on SQLite: the plans of `store.sql.children`, and a child's end."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.store.ops import (
    CancelChildren,
    EndChild,
    FinishTask,
    StartChild,
    WaitChildren,
)
from shepherd.store.sql import children
from shepherd.store.sqlite import tasks
from shepherd.store.sqlite.batch import WRITES

if TYPE_CHECKING:
    from shepherd.store.sqlite.batch import SqliteBatch

__all__ = ["cancel", "end", "start", "wait"]


@WRITES.handles(StartChild)
def start(batch: SqliteBatch, ops: Sequence[StartChild]) -> list[object]:
    """Record child steps and insert their child tasks (fenced); park parents with `wait`."""
    return batch.run(children.start(batch, ops))


@WRITES.handles(WaitChildren)
def wait(batch: SqliteBatch, ops: Sequence[WaitChildren]) -> list[object]:
    """Give up parents' claims until one of the children they wait on ends (fenced)."""
    return batch.run(children.wait(batch, ops))


@WRITES.handles(CancelChildren)
def cancel(batch: SqliteBatch, ops: Sequence[CancelChildren]) -> list[object]:
    """Cancel the children that go with their ending parent (fenced)."""
    return batch.run(children.cancel_owned(batch, ops))


@WRITES.handles(EndChild)
def end(batch: SqliteBatch, ops: Sequence[EndChild]) -> list[object]:
    """Each end written as alone; then the awaited steps of those that were written."""
    out: list[object] = []
    for op in ops:
        then = op.end
        if isinstance(then, FinishTask):
            (outcome,) = tasks.finish(batch, [then])
        else:
            (outcome,) = tasks.fail(batch, [then])
        if outcome is None:
            batch.run(children.resume(batch, [children.ended_of(then)]))
        out.append(outcome)
    return out
