"""Reminders of exclusive owners on SQLite: the plans of `store.sql.reminders`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.store.ops import (
    FireReminders,
    ForgetReminder,
    ListReminders,
    NextReminder,
    SetReminder,
)
from shepherd.store.sql import reminders
from shepherd.store.sql.dialect import SQLITE
from shepherd.store.sqlite.batch import READS, WRITES, Reading

if TYPE_CHECKING:
    from datetime import datetime

    from shepherd.core.reminders import Reminder
    from shepherd.store.sqlite.batch import SqliteBatch

# The handlers are filed in WRITES and READS, not imported by name.
__all__: list[str] = []


@WRITES.handles(SetReminder)
def set_reminder(batch: SqliteBatch, ops: Sequence[SetReminder]) -> list[object]:
    """Store (or replace) each reminder whose payload encodes."""
    return batch.run(reminders.set_reminders(batch, ops))


@WRITES.handles(ForgetReminder)
def forget_reminder(batch: SqliteBatch, ops: Sequence[ForgetReminder]) -> list[object]:
    """Delete each reminder; whether it existed."""
    return batch.run(reminders.forget(batch, ops))


@WRITES.handles(FireReminders)
def fire_reminders(batch: SqliteBatch, ops: Sequence[FireReminders]) -> list[object]:
    """Fire the due reminders, each in the transaction that moves it on."""
    return batch.run(reminders.fire_reminders(batch, ops))


# -- reads ---------------------------------------------------------------------
@READS.handles(ListReminders)
def list_reminders(at: Reading, op: ListReminders) -> list[Reminder]:
    """The reminders of an agent (and key), or all."""
    return at.run(reminders.list_reminders(SQLITE, op))


@READS.handles(NextReminder)
def next_reminder(at: Reading, op: NextReminder) -> datetime | None:
    """The earliest next tick of any reminder, or None."""
    return at.run(reminders.next_reminder(SQLITE))
