"""Capacity slots, for both backends: leases on units of a resource's capacity.

A taker first locks the rows of the resources it takes slots of, in name order
(PostgreSQL `FOR UPDATE`, so that two batches never wait for each other in a
cycle; on SQLite the write lock is held already), then reads the held slots in
a later statement, whose snapshot sees every slot committed by the takers
before it, and inserts what `core.resources.grant_slots` decides: at most
`capacity` unexpired slots of a resource exist at once, across every process.
Expiry is on the store's clock; an expired slot no longer counts and is
deleted by the next taker of its resource. A release rings SLOTS.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.core.resources import Slot, grant_slots
from shepherd.errors import UnknownResourceError
from shepherd.store.sql.plan import Query, each, one, send

if TYPE_CHECKING:
    from shepherd.store.ops import AcquireSlots, RenewSlots
    from shepherd.store.sql.plan import Plan, Writing

__all__ = ["acquire", "renew"]

_LOCK = "SELECT name, capacity FROM resources WHERE name {list} ORDER BY name{for_update}"
_EXPIRED = "DELETE FROM resource_slots WHERE resource {list} AND expires_at <= ?"
# Every slot of the resources is unexpired here (the expired ones were just deleted).
_HELD = "SELECT resource, holder FROM resource_slots WHERE resource {list}"
_COLUMNS = "resource_slots (resource, holder, worker, acquired_at, expires_at)"
_UPSERT = (
    "ON CONFLICT (resource, holder) DO UPDATE SET worker = excluded.worker, "
    "expires_at = excluded.expires_at"
)
# (resource, holder, worker, now, expires_at): one slot.
_TAKE = f"INSERT INTO {_COLUMNS} VALUES (?, ?, ?, ?, ?) {_UPSERT}"
# (resource, worker, now, expires_at, holders): the slots of one resource (arrays).
_TAKE_ARRAY = f"INSERT INTO {_COLUMNS} SELECT ?, h, ?, ?, ? FROM unnest(?::text[]) AS h {_UPSERT}"
_RENEW = (
    "UPDATE resource_slots SET expires_at = ? WHERE worker = ? AND expires_at > ? "
    "RETURNING resource, holder"
)


def acquire(batch: Writing, ops: Sequence[AcquireSlots]) -> Plan[list[object]]:
    """Grant slots to each operation's holders, in order, while the capacity allows."""
    d, now = batch.dialect, batch.now
    names = sorted({op.resource for op in ops})
    capacities: dict[str, int | None] = {}
    held: dict[str, set[str]] = {name: set() for name in names}
    for chunk in d.chunks(names):
        sql, listed = d.listed(_LOCK, chunk)
        capacities.update((yield from one(sql, listed)))
        sql, listed = d.listed(_EXPIRED, chunk)
        yield from send(sql, (*listed, now))
        sql, listed = d.listed(_HELD, chunk)
        for resource, holder in (yield from one(sql, listed)):
            held[resource].add(holder)
    out: list[object] = []
    takes: list[Query] = []
    for op in ops:
        resource = op.resource
        if resource not in capacities:
            out.append(UnknownResourceError(resource))
            continue
        capacity = capacities[resource]
        if capacity is None:
            out.append((list(op.holders), None))
            continue
        granted = grant_slots(op.holders, held[resource], capacity)
        held[resource].update(granted)
        expires_at = d.later(now, op.lease)
        if d.arrays:
            takes.append(Query(d.sql(_TAKE_ARRAY), (resource, op.worker, now, expires_at, granted)))
        else:
            rows = [(resource, h, op.worker, now, expires_at) for h in granted]
            takes.append(each(d.sql(_TAKE), rows))
        out.append((granted, capacity))
    if takes:
        yield [query._replace(rows=False) for query in takes]
    return out


def renew(batch: Writing, ops: Sequence[RenewSlots]) -> Plan[list[object]]:
    """Move each worker's unexpired slots ahead; the slots renewed."""
    d, now = batch.dialect, batch.now
    sql = d.sql(_RENEW)
    renewed = yield [Query(sql, (d.later(now, op.lease), op.worker, now)) for op in ops]
    return [[Slot(r, h) for r, h in rows] for rows in renewed]
