"""Rates: a resource's token bucket, shared by every process."""

from __future__ import annotations

from dataclasses import KW_ONLY

from shepherd.store.ops.base import Runs, Write, method, operation

__all__ = ["Rates", "TakeTokens"]


@operation
class TakeTokens(Write[tuple[int, float | None, float]]):
    """Take up to `want` tokens of `resource`'s bucket, shared by every process.

    Returns (granted, rate, wait): the bucket (`shepherd.core.rates`) holds at
    most one second's worth of tokens and gains `rate` a second; takes from
    every process take turns on it. `wait` is the seconds until the next
    token when fewer than `want` were granted. A resource without a rate
    grants everything and stores nothing: (want, None, 0.0).

    Raises:
        UnknownResourceError: There is no resource of that name.
    """

    resource: str
    _: KW_ONLY
    want: int


class Rates(Runs):
    """The store's methods for rates."""

    take_tokens = method(TakeTokens)
