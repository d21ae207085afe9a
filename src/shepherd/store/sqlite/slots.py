"""Batch handlers for capacity slots: leases on units of a resource's capacity.

A slot is taken under the transaction's write lock (BEGIN IMMEDIATE): no other
process counts or inserts a slot between our count and our insert, so at most
`capacity` unexpired slots of a resource exist at once. Expiry is on the
store's clock; an expired slot no longer counts and is deleted by the next
taker of its resource.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.core.resources import Slot, grant_slots
from shepherd.errors import UnknownResourceError
from shepherd.store import signals as ch
from shepherd.store.ops import AcquireSlots, ReleaseSlots, RenewSlots
from shepherd.store.sqlite.batch import WRITES

if TYPE_CHECKING:
    import sqlite3

    from shepherd.store.sqlite.batch import Batch

__all__ = ["acquire", "release", "release_slots", "renew"]

_CAPACITY = "SELECT capacity FROM resources WHERE name = ?"
_EXPIRED = "DELETE FROM resource_slots WHERE resource = ? AND expires_at <= ?"
# Every slot of the resource is unexpired here (the expired ones were just deleted).
_HELD = "SELECT holder FROM resource_slots WHERE resource = ?"
_TAKE = (
    "INSERT INTO resource_slots (resource, holder, worker, acquired_at, expires_at) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (resource, holder) DO UPDATE SET "
    "worker = excluded.worker, expires_at = excluded.expires_at"
)
_RENEW = (
    "UPDATE resource_slots SET expires_at = ? WHERE worker = ? AND expires_at > ? "
    "RETURNING resource, holder"
)
_RELEASE = "DELETE FROM resource_slots WHERE resource = ? AND holder = ?"


@WRITES.handles(AcquireSlots)
def acquire(batch: Batch, ops: Sequence[AcquireSlots]) -> list[object]:
    """Grant slots to each operation's holders, in order, while the capacity allows."""
    conn, now = batch.conn, batch.now
    out: list[object] = []
    for op in ops:
        resource = op.resource
        row = conn.execute(_CAPACITY, (resource,)).fetchone()
        if row is None:
            out.append(UnknownResourceError(resource))
            continue
        capacity = row[0]
        if capacity is None:
            out.append((list(op.holders), None))
            continue
        conn.execute(_EXPIRED, (resource, now))
        held = {h for (h,) in conn.execute(_HELD, (resource,))}
        granted = grant_slots(op.holders, held, capacity)
        rows = [(resource, h, op.worker, now, now + op.lease) for h in granted]
        conn.executemany(_TAKE, rows)
        out.append((granted, capacity))
    return out


@WRITES.handles(RenewSlots)
def renew(batch: Batch, ops: Sequence[RenewSlots]) -> list[object]:
    """Move each worker's unexpired slots ahead; the slots renewed."""
    conn, now = batch.conn, batch.now
    return [
        [Slot(r, h) for r, h in conn.execute(_RENEW, (now + op.lease, op.worker, now)).fetchall()]
        for op in ops
    ]


@WRITES.handles(ReleaseSlots)
def release_slots(batch: Batch, ops: Sequence[ReleaseSlots]) -> list[object]:
    """Give slots back; how many of each operation's were still held."""
    return [release(batch, op.slots) for op in ops]


def release(batch: Batch, slots: Sequence[Slot]) -> int:
    """Delete `slots` (also from a reply's transaction) and ring SLOTS; how many were held."""
    if not slots:
        return 0
    conn: sqlite3.Connection = batch.conn
    held = sum(conn.execute(_RELEASE, (s.resource, s.holder)).rowcount for s in slots)
    batch.rings.add(ch.SLOTS)
    return held
