"""Exclusive owners on PostgreSQL: the plans of `store.sql.owners`, pipelined.

`ON CONFLICT DO UPDATE` locks a taken key's row and decides on its latest
version, so of two processes taking one key at once exactly one gets it; every
taker locks its keys in (agent, key) order. The takes, renewals and releases
of a batch are sent together and read together: one round trip.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.store.ops import ListKeyLeases, ReleaseKeys, RenewKeys, TakeKeys
from shepherd.store.postgres.batch import WRITES
from shepherd.store.postgres.reader import READS, read
from shepherd.store.sql import owners
from shepherd.store.sql.dialect import POSTGRES

if TYPE_CHECKING:
    from shepherd.core.ownership import KeyLease
    from shepherd.store.postgres.batch import PostgresBatch
    from shepherd.store.postgres.reader import Reader

__all__ = ["list_key_leases", "release_keys", "renew_keys", "take_keys"]


@WRITES.handles(TakeKeys)
async def take_keys(batch: PostgresBatch, ops: Sequence[TakeKeys]) -> list[object]:
    """Take or renew each operation's keys; the ones granted, in the order asked."""
    return await batch.run(owners.take_keys(batch, ops))


@WRITES.handles(RenewKeys)
async def renew_keys(batch: PostgresBatch, ops: Sequence[RenewKeys]) -> list[object]:
    """Move each owner's live key leases ahead; the leases renewed."""
    return await batch.run(owners.renew_keys(batch, ops))


@WRITES.handles(ReleaseKeys)
async def release_keys(batch: PostgresBatch, ops: Sequence[ReleaseKeys]) -> list[object]:
    """Hand keys back; how many of each operation's the owner still held."""
    return await batch.run(owners.release_keys(batch, ops))


@READS.handles(ListKeyLeases)
async def list_key_leases(reader: Reader, op: ListKeyLeases) -> list[KeyLease]:
    """The owned keys of one agent, by key."""
    return await read(reader, owners.list_key_leases(POSTGRES, op))
