"""Reminders of exclusive owners on PostgreSQL: the plans of `store.sql.reminders`."""

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
from shepherd.store.postgres.batch import WRITES
from shepherd.store.postgres.reader import READS, read
from shepherd.store.sql import reminders
from shepherd.store.sql.dialect import POSTGRES

if TYPE_CHECKING:
    from datetime import datetime

    from shepherd.core.reminders import Reminder
    from shepherd.store.postgres.batch import PostgresBatch
    from shepherd.store.postgres.reader import Reader

# The handlers are filed in WRITES and READS, not imported by name.
__all__: list[str] = []


@WRITES.handles(SetReminder)
async def set_reminder(batch: PostgresBatch, ops: Sequence[SetReminder]) -> list[object]:
    """Store (or replace) each reminder whose payload encodes."""
    return await batch.run(reminders.set_reminders(batch, ops))


@WRITES.handles(ForgetReminder)
async def forget_reminder(batch: PostgresBatch, ops: Sequence[ForgetReminder]) -> list[object]:
    """Delete each reminder; whether it existed."""
    return await batch.run(reminders.forget(batch, ops))


@WRITES.handles(FireReminders)
async def fire_reminders(batch: PostgresBatch, ops: Sequence[FireReminders]) -> list[object]:
    """Fire the due reminders, each in the transaction that moves it on."""
    return await batch.run(reminders.fire_reminders(batch, ops))


# -- reads ---------------------------------------------------------------------
@READS.handles(ListReminders)
async def list_reminders(reader: Reader, op: ListReminders) -> list[Reminder]:
    """The reminders of an agent (and key), or all."""
    return await read(reader, reminders.list_reminders(POSTGRES, op))


@READS.handles(NextReminder)
async def next_reminder(reader: Reader, op: NextReminder) -> datetime | None:
    """The earliest next tick of any reminder, or None."""
    return await read(reader, reminders.next_reminder(POSTGRES))
