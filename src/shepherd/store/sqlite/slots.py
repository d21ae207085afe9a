"""Capacity slots on SQLite: the plans of `store.sql.slots`, and the release of slots.

A slot is taken under the transaction's write lock (BEGIN IMMEDIATE): no other
process counts or inserts a slot between our count and our insert. A release
deletes its slots one statement each (a reply's transaction gives back its
handling's slot too).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.store import signals as ch
from shepherd.store.ops import AcquireSlots, ReleaseSlots, RenewSlots
from shepherd.store.sql import slots
from shepherd.store.sqlite.batch import WRITES

if TYPE_CHECKING:
    import sqlite3

    from shepherd.core.resources import Slot
    from shepherd.store.sqlite.batch import SqliteBatch

__all__ = ["acquire", "release", "release_slots", "renew"]

_RELEASE = "DELETE FROM resource_slots WHERE resource = ? AND holder = ?"


@WRITES.handles(AcquireSlots)
def acquire(batch: SqliteBatch, ops: Sequence[AcquireSlots]) -> list[object]:
    """Grant slots to each operation's holders, in order, while the capacity allows."""
    return batch.run(slots.acquire(batch, ops))


@WRITES.handles(RenewSlots)
def renew(batch: SqliteBatch, ops: Sequence[RenewSlots]) -> list[object]:
    """Move each worker's unexpired slots ahead; the slots renewed."""
    return batch.run(slots.renew(batch, ops))


@WRITES.handles(ReleaseSlots)
def release_slots(batch: SqliteBatch, ops: Sequence[ReleaseSlots]) -> list[object]:
    """Give slots back; how many of each operation's were still held."""
    return [release(batch, op.slots) for op in ops]


def release(batch: SqliteBatch, given: Sequence[Slot]) -> int:
    """Delete `given` slots (also from a reply's transaction) and ring SLOTS; how many were held."""
    if not given:
        return 0
    conn: sqlite3.Connection = batch.conn
    held = sum(conn.execute(_RELEASE, (s.resource, s.holder)).rowcount for s in given)
    batch.rings.add(ch.SLOTS)
    return held
