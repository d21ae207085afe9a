"""Child workflows on PostgreSQL: the plans of `store.sql.children`, and a child's end."""

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
from shepherd.store.postgres.batch import WRITES
from shepherd.store.postgres.tasks import finish_with, send_lock_owners, write_owned
from shepherd.store.sql import children

if TYPE_CHECKING:
    from shepherd.store.postgres.batch import PostgresBatch

__all__ = ["cancel", "end", "start", "wait"]


@WRITES.handles(StartChild)
async def start(batch: PostgresBatch, ops: Sequence[StartChild]) -> list[object]:
    """Record child steps and insert their child tasks (fenced); park parents with `wait`."""
    return await batch.run(children.start(batch, ops))


@WRITES.handles(WaitChildren)
async def wait(batch: PostgresBatch, ops: Sequence[WaitChildren]) -> list[object]:
    """Give up parents' claims until one of the children they wait on ends (fenced)."""
    return await batch.run(children.wait(batch, ops))


@WRITES.handles(CancelChildren)
async def cancel(batch: PostgresBatch, ops: Sequence[CancelChildren]) -> list[object]:
    """Cancel the children that go with their ending parent (fenced)."""
    return await batch.run(children.cancel_owned(batch, ops))


@WRITES.handles(EndChild)
async def end(batch: PostgresBatch, ops: Sequence[EndChild]) -> list[object]:
    """Each end written as alone; then the awaited steps of those that were written."""
    out: list[object] = []
    for op in ops:
        then = op.end
        if isinstance(then, FinishTask):
            locked = await send_lock_owners(batch, [then.task_id])
            (outcome,) = await finish_with(batch, [then], await locked())
        else:
            (outcome,) = await write_owned(batch, [then])
        if outcome is None:
            await batch.run(children.resume(batch, [children.ended_of(then)]))
        out.append(outcome)
    return out
