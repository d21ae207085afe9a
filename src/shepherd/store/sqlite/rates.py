"""Batch handlers for resources' token buckets (their `rate`), shared by every process.

A take reads the bucket and writes it back under the transaction's write lock
(BEGIN IMMEDIATE), so takes from every process take turns. The decision is
`shepherd.core.rates.take` on the store's clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.core.rates import Bucket, take
from shepherd.errors import UnknownResourceError
from shepherd.store.ops import TakeTokens
from shepherd.store.sqlite.batch import WRITES

if TYPE_CHECKING:
    from shepherd.store.sqlite.batch import SqliteBatch

__all__ = ["take_tokens"]

_RATE = "SELECT rate FROM resources WHERE name = ?"
_BUCKET = "SELECT tokens, at FROM resource_tokens WHERE resource = ?"
_SAVE = (
    "INSERT INTO resource_tokens (resource, tokens, at) VALUES (?, ?, ?) "
    "ON CONFLICT (resource) DO UPDATE SET tokens = excluded.tokens, at = excluded.at"
)


@WRITES.handles(TakeTokens)
def take_tokens(batch: SqliteBatch, ops: Sequence[TakeTokens]) -> list[object]:
    """Take tokens from each resource's stored bucket, in order."""
    conn, now = batch.conn, batch.now
    out: list[object] = []
    for op in ops:
        row = conn.execute(_RATE, (op.resource,)).fetchone()
        if row is None:
            out.append(UnknownResourceError(op.resource))
            continue
        rate = row[0]
        if rate is None:
            out.append((op.want, None, 0.0))
            continue
        stored = conn.execute(_BUCKET, (op.resource,)).fetchone()
        bucket = Bucket.full(rate, at=now) if stored is None else Bucket(*stored)
        decided = take(bucket, rate=rate, want=op.want, now=now)
        conn.execute(_SAVE, (op.resource, decided.bucket.tokens, decided.bucket.at))
        out.append((decided.granted, rate, decided.wait))
    return out
