"""A resource's rate: a token bucket shared by every process, as pure decisions.

A resource with a `rate` (calls per second) has one bucket in the store. It
holds at most `burst` tokens (one second's worth, and at least one) and gains
`rate` tokens a second; a call spends one. The store runs `take` on the stored
bucket inside a transaction that locks it, so every process draws from the
same bucket. Times are seconds on the store's clock; nothing here reads a
clock or does I/O.

Over any span of `t` seconds a bucket grants at most `burst + rate * t`
tokens: that is the guarantee `shepherd.governance.rates` builds on (and what the
property test checks).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Bucket", "Take", "burst_of", "take"]


def burst_of(rate: float) -> float:
    """The most tokens a bucket of `rate` holds: one second's worth, at least one."""
    return max(1.0, rate)


@dataclass(frozen=True, slots=True)
class Bucket:
    """A stored bucket: its tokens as of `at` (seconds on the store's clock)."""

    tokens: float
    at: float

    @classmethod
    def full(cls, rate: float, at: float) -> Bucket:
        """A bucket never used: full."""
        return cls(tokens=burst_of(rate), at=at)


@dataclass(frozen=True, slots=True)
class Take:
    """What a take decided: the bucket to store, the tokens granted, the wait for more."""

    bucket: Bucket
    granted: int
    #: Seconds until the next token, when fewer than asked were granted (else 0).
    wait: float


def take(bucket: Bucket, *, rate: float, want: int, now: float) -> Take:
    """Refill `bucket` to `now`, then grant up to `want` whole tokens.

    A clock that went backwards refills nothing (the bucket keeps its time).
    """
    if rate <= 0 or not math.isfinite(rate):
        raise ValueError(f"rate must be a positive number, not {rate!r}")
    if want < 0:
        raise ValueError(f"want must be at least 0, not {want}")
    elapsed = max(0.0, now - bucket.at)
    tokens = min(burst_of(rate), bucket.tokens + elapsed * rate)
    granted = min(want, math.floor(tokens + 1e-9))
    left = max(0.0, tokens - granted)
    at = max(now, bucket.at)
    wait = 0.0 if granted >= want else max(0.0, (1.0 - left) / rate)
    return Take(bucket=Bucket(tokens=left, at=at), granted=granted, wait=wait)
