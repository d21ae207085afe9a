"""Batch handlers for exclusive owners: leases on the keys of exclusive agents.

Every statement runs under the transaction's write lock (BEGIN IMMEDIATE), so
two processes never take the same key at once. A key is taken by an upsert
whose update applies only where the key is free (no owner, or its lease
expired) or already this owner's: the row says who won. Expiry is on the
store's clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.core.ownership import KeyLease, TakenKey
from shepherd.payloads import loads
from shepherd.store.ops import ListKeyLeases, ReleaseKeys, RenewKeys, TakeKeys
from shepherd.store.rows import unix_instant
from shepherd.store.sqlite.batch import READS, WRITES, Reading

if TYPE_CHECKING:
    from shepherd.store.sqlite.batch import Batch

__all__ = ["list_key_leases", "release_keys", "renew_keys", "take_keys"]

# (agent, key, owner, lease_until, now, now, now): a free key is taken with its
# epoch bumped, one's own live lease is renewed.
_TAKE = (
    "INSERT INTO owner_keys (agent, key, owner, epoch, lease_until, state, updated_at) "
    "VALUES (?, ?, ?, 1, ?, NULL, ?) ON CONFLICT (agent, key) DO UPDATE SET "
    "epoch = CASE WHEN owner_keys.owner = excluded.owner AND owner_keys.lease_until > ? "
    "THEN owner_keys.epoch ELSE owner_keys.epoch + 1 END, "
    "owner = excluded.owner, lease_until = excluded.lease_until, updated_at = excluded.updated_at "
    "WHERE owner_keys.owner IS NULL OR owner_keys.owner = excluded.owner "
    "OR owner_keys.lease_until <= ? "
    "RETURNING owner, epoch, lease_until, state"
)
_RENEW = (
    "UPDATE owner_keys SET lease_until = ?, updated_at = ? WHERE owner = ? AND lease_until > ? "
    "RETURNING agent, key, owner, epoch, lease_until"
)
_RELEASE = (
    "UPDATE owner_keys SET owner = NULL, lease_until = ?, updated_at = ? "
    "WHERE agent = ? AND key = ? AND owner = ? AND lease_until > ?"
)
_LIST = (
    "SELECT key, owner, epoch, lease_until FROM owner_keys "
    "WHERE agent = ? AND owner IS NOT NULL ORDER BY key"
)


@WRITES.handles(TakeKeys)
def take_keys(batch: Batch, ops: Sequence[TakeKeys]) -> list[object]:
    """Take or renew each operation's keys; the ones granted, in the order asked."""
    conn, now = batch.conn, batch.now
    out: list[object] = []
    for op in ops:
        until = now + op.lease
        taken: list[TakenKey] = []
        for key in op.keys:
            row = conn.execute(_TAKE, (op.agent, key, op.owner, until, now, now, now)).fetchone()
            if row is None:
                continue  # another owner holds it live
            owner, epoch, lease_until, state = row
            lease = KeyLease(
                key=key, owner=owner, epoch=epoch, lease_until=unix_instant(lease_until)
            )
            taken.append(TakenKey(lease=lease, state=None if state is None else loads(state)))
        out.append(taken)
    return out


@WRITES.handles(RenewKeys)
def renew_keys(batch: Batch, ops: Sequence[RenewKeys]) -> list[object]:
    """Move each owner's live key leases ahead; the leases renewed."""
    conn, now = batch.conn, batch.now
    return [
        [
            KeyLease(key=k, owner=o, epoch=e, lease_until=unix_instant(u))
            for _, k, o, e, u in conn.execute(
                _RENEW, (now + op.lease, now, op.owner, now)
            ).fetchall()
        ]
        for op in ops
    ]


@WRITES.handles(ReleaseKeys)
def release_keys(batch: Batch, ops: Sequence[ReleaseKeys]) -> list[object]:
    """Hand keys back; how many of each operation's the owner still held."""
    conn, now = batch.conn, batch.now
    return [
        sum(
            conn.execute(_RELEASE, (now, now, op.agent, key, op.owner, now)).rowcount
            for key in op.keys
        )
        for op in ops
    ]


@READS.handles(ListKeyLeases)
def list_key_leases(at: Reading, op: ListKeyLeases) -> list[KeyLease]:
    """The owned keys of one agent, by key."""
    return [
        KeyLease(key=k, owner=o, epoch=e, lease_until=unix_instant(u))
        for k, o, e, u in at.conn.execute(_LIST, (op.agent,)).fetchall()
    ]
