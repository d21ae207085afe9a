"""Batch handlers for resources' token buckets (their `rate`), shared by every process.

A take locks the resources' rows first (`FOR UPDATE`, in name order, as a
capacity slot's taker does), so takes from every process take turns on a
bucket. The decision is `shepherd.core.rates.take` on the database's clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from shepherd.core.rates import Bucket, take
from shepherd.errors import UnknownResourceError
from shepherd.store.ops import TakeTokens
from shepherd.store.postgres.batch import WRITES

if TYPE_CHECKING:
    from shepherd.store.postgres.batch import PostgresBatch

__all__ = ["take_tokens"]

_LOCK = "SELECT name, rate FROM resources WHERE name = ANY(%s) ORDER BY name FOR UPDATE"
_BUCKETS = "SELECT resource, tokens, at FROM resource_tokens WHERE resource = ANY(%s)"
_SAVE = (
    "INSERT INTO resource_tokens (resource, tokens, at) "
    "SELECT * FROM unnest(%s::text[], %s::float8[], %s::timestamptz[]) "
    "ON CONFLICT (resource) DO UPDATE SET tokens = excluded.tokens, at = excluded.at"
)


@WRITES.handles(TakeTokens)
async def take_tokens(batch: PostgresBatch, ops: Sequence[TakeTokens]) -> list[object]:
    """Take tokens from each resource's locked bucket, in order."""
    now = batch.now.timestamp()
    names = sorted({op.resource for op in ops})
    rates: dict[str, float | None] = dict(await (await batch.send(_LOCK, (names,))).fetchall())
    buckets = {
        name: Bucket(tokens, at.timestamp())
        for name, tokens, at in await (await batch.send(_BUCKETS, (names,))).fetchall()
    }
    out: list[object] = []
    for op in ops:
        if op.resource not in rates:
            out.append(UnknownResourceError(op.resource))
            continue
        rate = rates[op.resource]
        if rate is None:
            out.append((op.want, None, 0.0))
            continue
        bucket = buckets.get(op.resource) or Bucket.full(rate, at=now)
        decided = take(bucket, rate=rate, want=op.want, now=now)
        buckets[op.resource] = decided.bucket
        out.append((decided.granted, rate, decided.wait))
    changed = [name for name in names if name in buckets and rates.get(name) is not None]
    if changed:
        columns = (
            changed,
            [buckets[n].tokens for n in changed],
            [datetime.fromtimestamp(buckets[n].at, UTC) for n in changed],
        )
        await batch.send(_SAVE, columns)
    return out
