"""Batch handlers for exclusive owners: leases on the keys of exclusive agents.

A key is taken by an upsert whose update applies only where the key is free
(no owner, or its lease expired) or already this owner's. `ON CONFLICT DO
UPDATE` locks the row and evaluates that condition on its latest version, so
of two processes taking one key at once exactly one gets it: the row says who
won. Expiry is on the database's clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

from shepherd.core.ownership import KeyLease, TakenKey
from shepherd.payloads import loads
from shepherd.store.ops import ListKeyLeases, ReleaseKeys, RenewKeys, TakeKeys
from shepherd.store.postgres.batch import WRITES
from shepherd.store.postgres.reader import READS
from shepherd.store.postgres.rows import utc

if TYPE_CHECKING:
    from psycopg.rows import TupleRow

    from shepherd.store.postgres.batch import Batch
    from shepherd.store.postgres.reader import Reader

__all__ = ["list_key_leases", "release_keys", "renew_keys", "take_keys"]

# (agent, key, owner, lease_until, now, now, now): a free key is taken with its
# epoch bumped, one's own live lease is renewed.
_TAKE = (
    "INSERT INTO owner_keys AS o (agent, key, owner, epoch, lease_until, state, updated_at) "
    "VALUES (%s, %s, %s, 1, %s, NULL, %s) ON CONFLICT (agent, key) DO UPDATE SET "
    "epoch = CASE WHEN o.owner = excluded.owner AND o.lease_until > %s THEN o.epoch "
    "ELSE o.epoch + 1 END, "
    "owner = excluded.owner, lease_until = excluded.lease_until, updated_at = excluded.updated_at "
    "WHERE o.owner IS NULL OR o.owner = excluded.owner OR o.lease_until <= %s "
    "RETURNING o.owner, o.epoch, o.lease_until, o.state"
)
_RENEW = (
    "UPDATE owner_keys SET lease_until = %s, updated_at = %s WHERE owner = %s "
    "AND lease_until > %s RETURNING key, owner, epoch, lease_until"
)
_RELEASE = (
    "UPDATE owner_keys SET owner = NULL, lease_until = %s, updated_at = %s "
    "WHERE agent = %s AND key = ANY(%s::text[]) AND owner = %s AND lease_until > %s "
    "RETURNING key"
)
_LIST = (
    "SELECT key, owner, epoch, lease_until FROM owner_keys "
    "WHERE agent = %s AND owner IS NOT NULL ORDER BY key"
)


@WRITES.handles(TakeKeys)
async def take_keys(batch: Batch, ops: Sequence[TakeKeys]) -> list[object]:
    """Take or renew each operation's keys; the ones granted, in the order asked."""
    now = batch.now
    asked: list[tuple[TakeKeys, str, tuple[object, ...]]] = []
    for op in ops:
        until = now + timedelta(seconds=op.lease)
        asked.extend((op, key, (op.agent, key, op.owner, until, now, now, now)) for key in op.keys)
    # Rows locked in one order (agent, key) by every taker: two processes sharing
    # out the same keys at once would otherwise deadlock, each holding a key the
    # other waits for.
    order = sorted(range(len(asked)), key=lambda i: (asked[i][0].agent, asked[i][1]))
    locked = await batch.first_rows(_TAKE, [asked[i][2] for i in order])
    rows: list[TupleRow | None] = [None] * len(asked)
    for i, row in zip(order, locked, strict=True):
        rows[i] = row
    taken: dict[int, list[TakenKey]] = {id(op): [] for op in ops}
    for (op, key, _), row in zip(asked, rows, strict=True):
        if row is None:
            continue  # another owner holds it live
        owner, epoch, lease_until, state = row
        lease = KeyLease(key=key, owner=owner, epoch=int(epoch), lease_until=utc(lease_until))
        taken[id(op)].append(TakenKey(lease=lease, state=None if state is None else loads(state)))
    return [taken[id(op)] for op in ops]


@WRITES.handles(RenewKeys)
async def renew_keys(batch: Batch, ops: Sequence[RenewKeys]) -> list[object]:
    """Move each owner's live key leases ahead; the leases renewed."""
    now = batch.now
    cursors = [
        await batch.send(_RENEW, (now + timedelta(seconds=op.lease), now, op.owner, now))
        for op in ops
    ]
    return [
        [
            KeyLease(key=k, owner=o, epoch=int(e), lease_until=utc(u))
            for k, o, e, u in await cursor.fetchall()
        ]
        for cursor in cursors
    ]


@WRITES.handles(ReleaseKeys)
async def release_keys(batch: Batch, ops: Sequence[ReleaseKeys]) -> list[object]:
    """Hand keys back; how many of each operation's the owner still held."""
    now = batch.now
    cursors = [
        await batch.send(_RELEASE, (now, now, op.agent, list(op.keys), op.owner, now)) for op in ops
    ]
    return [len(await cursor.fetchall()) for cursor in cursors]


@READS.handles(ListKeyLeases)
async def list_key_leases(reader: Reader, op: ListKeyLeases) -> list[KeyLease]:
    """The owned keys of one agent, by key."""
    rows = await reader.fetch(_LIST, (op.agent,))
    return [KeyLease(key=k, owner=o, epoch=int(e), lease_until=utc(u)) for k, o, e, u in rows]
