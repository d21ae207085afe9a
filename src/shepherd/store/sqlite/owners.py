"""Exclusive owners on SQLite: the plans of `store.sql.owners`, run under the write lock.

Every statement runs under the transaction's write lock (BEGIN IMMEDIATE), so
two processes never take the same key at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.store.ops import ListKeyLeases, ReleaseKeys, RenewKeys, TakeKeys
from shepherd.store.sql import owners
from shepherd.store.sql.dialect import SQLITE
from shepherd.store.sqlite.batch import READS, WRITES, Reading

if TYPE_CHECKING:
    from shepherd.core.ownership import KeyLease
    from shepherd.store.sqlite.batch import SqliteBatch

__all__ = ["list_key_leases", "release_keys", "renew_keys", "take_keys"]


@WRITES.handles(TakeKeys)
def take_keys(batch: SqliteBatch, ops: Sequence[TakeKeys]) -> list[object]:
    """Take or renew each operation's keys; the ones granted, in the order asked."""
    return batch.run(owners.take_keys(batch, ops))


@WRITES.handles(RenewKeys)
def renew_keys(batch: SqliteBatch, ops: Sequence[RenewKeys]) -> list[object]:
    """Move each owner's live key leases ahead; the leases renewed."""
    return batch.run(owners.renew_keys(batch, ops))


@WRITES.handles(ReleaseKeys)
def release_keys(batch: SqliteBatch, ops: Sequence[ReleaseKeys]) -> list[object]:
    """Hand keys back; how many of each operation's the owner still held."""
    return batch.run(owners.release_keys(batch, ops))


@READS.handles(ListKeyLeases)
def list_key_leases(at: Reading, op: ListKeyLeases) -> list[KeyLease]:
    """The owned keys of one agent, by key."""
    return at.run(owners.list_key_leases(SQLITE, op))
