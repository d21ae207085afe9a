"""Exclusive owners, for both backends: leases on the keys of exclusive agents.

A key is taken by an upsert whose update applies only where the key is free
(no owner, or its lease expired) or already this owner's: the row it returns
says who won. Both backends make that atomic: SQLite under its write lock,
PostgreSQL because `ON CONFLICT DO UPDATE` locks the row and evaluates the
condition on its latest version. Takers lock keys in one order, (agent, key),
so that processes sharing out the same keys at once never deadlock, each
holding a key the other waits for. Expiry is on the store's clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.core.ownership import KeyLease, TakenKey
from shepherd.payloads import loads
from shepherd.store.sql.plan import Query, one

if TYPE_CHECKING:
    from shepherd.store.ops import ListKeyLeases, ReleaseKeys, RenewKeys, TakeKeys
    from shepherd.store.sql.dialect import Dialect
    from shepherd.store.sql.plan import Plan, Rows, Writing

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
    "RETURNING key, owner, epoch, lease_until"
)
_RELEASE = (
    "UPDATE owner_keys SET owner = NULL, lease_until = ?, updated_at = ? "
    "WHERE agent = ? AND key {list} AND owner = ? AND lease_until > ? RETURNING key"
)
_LIST = (
    "SELECT key, owner, epoch, lease_until FROM owner_keys "
    "WHERE agent = ? AND owner IS NOT NULL ORDER BY key"
)


def take_keys(batch: Writing, ops: Sequence[TakeKeys]) -> Plan[list[object]]:
    """Take or renew each operation's keys; the ones granted, in the order asked."""
    d, now = batch.dialect, batch.now
    sql = d.sql(_TAKE)
    asked: list[tuple[TakeKeys, str, tuple[object, ...]]] = []
    for op in ops:
        until = d.later(now, op.lease)
        asked.extend((op, key, (op.agent, key, op.owner, until, now, now, now)) for key in op.keys)
    order = sorted(range(len(asked)), key=lambda i: (asked[i][0].agent, asked[i][1]))
    locked = yield [Query(sql, asked[i][2]) for i in order]
    rows: list[Rows] = [[]] * len(asked)
    for i, found in zip(order, locked, strict=True):
        rows[i] = found
    taken: dict[int, list[TakenKey]] = {id(op): [] for op in ops}
    for (op, key, _), found in zip(asked, rows, strict=True):
        if not found:
            continue  # another owner holds it live
        owner, epoch, lease_until, state = found[0]
        lease = KeyLease(key=key, owner=owner, epoch=int(epoch), lease_until=d.instant(lease_until))
        taken[id(op)].append(TakenKey(lease=lease, state=None if state is None else loads(state)))
    return [taken[id(op)] for op in ops]


def renew_keys(batch: Writing, ops: Sequence[RenewKeys]) -> Plan[list[object]]:
    """Move each owner's live key leases ahead; the leases renewed."""
    d, now = batch.dialect, batch.now
    sql = d.sql(_RENEW)
    renewed = yield [Query(sql, (d.later(now, op.lease), now, op.owner, now)) for op in ops]
    return [_leases(d, rows) for rows in renewed]


def release_keys(batch: Writing, ops: Sequence[ReleaseKeys]) -> Plan[list[object]]:
    """Hand keys back; how many of each operation's the owner still held."""
    d, now = batch.dialect, batch.now
    queries: list[Query] = []
    spans: list[int] = []
    for op in ops:
        chunks = d.chunks(op.keys)
        for keys in chunks:
            sql, listed = d.listed(_RELEASE, keys)
            queries.append(Query(sql, (now, now, op.agent, *listed, op.owner, now)))
        spans.append(len(chunks))
    released = iter((yield queries))
    return [sum(len(next(released)) for _ in range(span)) for span in spans]


def list_key_leases(d: Dialect, op: ListKeyLeases) -> Plan[list[KeyLease]]:
    """The owned keys of one agent, by key."""
    return _leases(d, (yield from one(d.sql(_LIST), (op.agent,))))


def _leases(d: Dialect, rows: Rows) -> list[KeyLease]:
    return [KeyLease(key=k, owner=o, epoch=int(e), lease_until=d.instant(u)) for k, o, e, u in rows]
