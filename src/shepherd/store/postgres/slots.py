"""Capacity slots on PostgreSQL: the plans of `store.sql.slots`, and the release of slots.

A taker locks its resources' rows (`FOR UPDATE`, in name order) before it
counts their slots. A release deletes its slots in one statement over arrays
(a reply's transaction gives back its handling's slot too, without waiting
for it); SLOTS is NOTIFYed at commit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.store import signals as ch
from shepherd.store.ops import AcquireSlots, ReleaseSlots, RenewSlots
from shepherd.store.postgres.batch import WRITES
from shepherd.store.sql import slots

if TYPE_CHECKING:
    from psycopg import AsyncCursor
    from psycopg.rows import TupleRow

    from shepherd.core.resources import Slot
    from shepherd.store.postgres.batch import PostgresBatch

__all__ = ["acquire", "release", "release_slots", "renew"]

_RELEASE = (
    "DELETE FROM resource_slots s USING unnest(%s::text[], %s::text[]) AS g (resource, holder) "
    "WHERE s.resource = g.resource AND s.holder = g.holder RETURNING s.holder"
)


@WRITES.handles(AcquireSlots)
async def acquire(batch: PostgresBatch, ops: Sequence[AcquireSlots]) -> list[object]:
    """Grant slots to each operation's holders, in order, while the capacity allows."""
    return await batch.run(slots.acquire(batch, ops))


@WRITES.handles(RenewSlots)
async def renew(batch: PostgresBatch, ops: Sequence[RenewSlots]) -> list[object]:
    """Move each worker's unexpired slots ahead; the slots renewed."""
    return await batch.run(slots.renew(batch, ops))


@WRITES.handles(ReleaseSlots)
async def release_slots(batch: PostgresBatch, ops: Sequence[ReleaseSlots]) -> list[object]:
    """Give slots back; how many of each operation's were still held."""
    cursors = [await release(batch, op.slots) for op in ops]
    return [0 if c is None else len(await c.fetchall()) for c in cursors]


async def release(batch: PostgresBatch, given: Sequence[Slot]) -> AsyncCursor[TupleRow] | None:
    """Send the deletion of the `given` slots (also from a reply's transaction); SLOTS is NOTIFYed
    at commit. Its cursor returns a row per slot that was still held."""
    if not given:
        return None
    params = ([s.resource for s in given], [s.holder for s in given])
    cursor = await batch.send(_RELEASE, params)
    batch.rings.add(ch.SLOTS)
    return cursor
