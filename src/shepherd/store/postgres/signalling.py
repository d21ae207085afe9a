"""Signals on PostgreSQL: the plans of `store.sql.signalling`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.store.ops import SendSignal, TaskSignals, WaitSignal
from shepherd.store.postgres.batch import WRITES
from shepherd.store.postgres.reader import READS, read
from shepherd.store.sql import signalling
from shepherd.store.sql.dialect import POSTGRES

if TYPE_CHECKING:
    from shepherd.core.signalling import Signal
    from shepherd.store.postgres.batch import PostgresBatch
    from shepherd.store.postgres.reader import Reader

# The handlers are filed in WRITES and READS, not imported by name.
__all__: list[str] = []


@WRITES.handles(SendSignal)
async def send_signal(batch: PostgresBatch, ops: Sequence[SendSignal]) -> list[object]:
    """Store each signal; deliver it into a running wait of its name."""
    return await batch.run(signalling.send_signals(batch, ops))


@WRITES.handles(WaitSignal)
async def wait_signal(batch: PostgresBatch, ops: Sequence[WaitSignal]) -> list[object]:
    """Each holder's wait: consume a signal, time out, or give up the claim (fenced)."""
    return await batch.run(signalling.wait_signals(batch, ops))


# -- reads ---------------------------------------------------------------------
@READS.handles(TaskSignals)
async def task_signals(reader: Reader, op: TaskSignals) -> list[Signal]:
    """A task's signals, in the order sent."""
    return await read(reader, signalling.task_signals(POSTGRES, op))
