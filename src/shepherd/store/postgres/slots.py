"""Batch handlers for capacity slots: leases on units of a resource's capacity.

A taker first locks the resource's row (`FOR UPDATE`, resources in name order
so that two batches never wait for each other in a cycle), then reads the held
slots in a later statement, whose snapshot sees every slot committed by the
takers before it, and inserts what `resource_rows.grant` decides: at most `capacity` unexpired slots of a resource exist at
once, across every process. Expiry is on the database's clock; an expired slot
no longer counts and is deleted by the next taker of its resource. SLOTS is
NOTIFYed at commit of a release.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

from shepherd.core.resources import Slot, grant_slots
from shepherd.errors import UnknownResourceError
from shepherd.store import signals as ch
from shepherd.store.ops import AcquireSlots, ReleaseSlots, RenewSlots
from shepherd.store.postgres.batch import WRITES

if TYPE_CHECKING:
    from psycopg import AsyncCursor
    from psycopg.rows import TupleRow

    from shepherd.store.postgres.batch import Batch

__all__ = ["acquire", "release", "release_slots", "renew"]

_LOCK = "SELECT name, capacity FROM resources WHERE name = ANY(%s) ORDER BY name FOR UPDATE"
_EXPIRED = "DELETE FROM resource_slots WHERE resource = ANY(%s) AND expires_at <= %s"
_HELD = "SELECT resource, holder FROM resource_slots WHERE resource = ANY(%s)"
_TAKE = (
    "INSERT INTO resource_slots (resource, holder, worker, acquired_at, expires_at) "
    "SELECT %s, h, %s, %s, %s FROM unnest(%s::text[]) AS h "
    "ON CONFLICT (resource, holder) DO UPDATE SET worker = excluded.worker, "
    "expires_at = excluded.expires_at"
)
_RENEW = (
    "UPDATE resource_slots SET expires_at = %s WHERE worker = %s AND expires_at > %s "
    "RETURNING resource, holder"
)
_RELEASE = (
    "DELETE FROM resource_slots s USING unnest(%s::text[], %s::text[]) AS g (resource, holder) "
    "WHERE s.resource = g.resource AND s.holder = g.holder RETURNING s.holder"
)


@WRITES.handles(AcquireSlots)
async def acquire(batch: Batch, ops: Sequence[AcquireSlots]) -> list[object]:
    """Grant slots to each operation's holders, in order, while the capacity allows."""
    now = batch.now
    names = sorted({op.resource for op in ops})
    cursor = await batch.send(_LOCK, (names,))
    capacities: dict[str, int | None] = dict(await cursor.fetchall())
    await batch.send(_EXPIRED, (names, now))
    held: dict[str, set[str]] = {name: set() for name in names}
    for resource, holder in await (await batch.send(_HELD, (names,))).fetchall():
        held[resource].add(holder)
    out: list[object] = []
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
        expires_at = now + timedelta(seconds=op.lease)
        await batch.send(_TAKE, (resource, op.worker, now, expires_at, granted))
        out.append((granted, capacity))
    return out


@WRITES.handles(RenewSlots)
async def renew(batch: Batch, ops: Sequence[RenewSlots]) -> list[object]:
    """Move each worker's unexpired slots ahead; the slots renewed."""
    now = batch.now
    cursors = [
        await batch.send(_RENEW, (now + timedelta(seconds=op.lease), op.worker, now)) for op in ops
    ]
    return [[Slot(r, h) for r, h in await cursor.fetchall()] for cursor in cursors]


@WRITES.handles(ReleaseSlots)
async def release_slots(batch: Batch, ops: Sequence[ReleaseSlots]) -> list[object]:
    """Give slots back; how many of each operation's were still held."""
    cursors = [await release(batch, op.slots) for op in ops]
    return [0 if c is None else len(await c.fetchall()) for c in cursors]


async def release(batch: Batch, slots: Sequence[Slot]) -> AsyncCursor[TupleRow] | None:
    """Send the deletion of `slots` (also from a reply's transaction); SLOTS is NOTIFYed
    at commit. Its cursor returns a row per slot that was still held."""
    if not slots:
        return None
    params = ([s.resource for s in slots], [s.holder for s in slots])
    cursor = await batch.send(_RELEASE, params)
    batch.rings.add(ch.SLOTS)
    return cursor
