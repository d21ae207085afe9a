"""Signals on SQLite: the plans of `store.sql.signalling`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.store.ops import SendSignal, TaskSignals, WaitSignal
from shepherd.store.sql import signalling
from shepherd.store.sql.dialect import SQLITE
from shepherd.store.sqlite.batch import READS, WRITES, Reading

if TYPE_CHECKING:
    from shepherd.core.signalling import Signal
    from shepherd.store.sqlite.batch import SqliteBatch

# The handlers are filed in WRITES and READS, not imported by name.
__all__: list[str] = []


@WRITES.handles(SendSignal)
def send_signal(batch: SqliteBatch, ops: Sequence[SendSignal]) -> list[object]:
    """Store each signal; deliver it into a running wait of its name."""
    return batch.run(signalling.send_signals(batch, ops))


@WRITES.handles(WaitSignal)
def wait_signal(batch: SqliteBatch, ops: Sequence[WaitSignal]) -> list[object]:
    """Each holder's wait: consume a signal, time out, or give up the claim (fenced)."""
    return batch.run(signalling.wait_signals(batch, ops))


# -- reads ---------------------------------------------------------------------
@READS.handles(TaskSignals)
def task_signals(at: Reading, op: TaskSignals) -> list[Signal]:
    """A task's signals, in the order sent."""
    return at.run(signalling.task_signals(SQLITE, op))
