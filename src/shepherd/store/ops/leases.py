"""Named leases: the supervisor's leadership (a lease with an epoch that fences its writes)."""

from __future__ import annotations

from dataclasses import KW_ONLY

from shepherd.core.records import Lease
from shepherd.store.ops.base import Read, Runs, Write, method, operation

__all__ = ["AcquireLease", "GetLease", "Leases", "ReleaseLease"]


@operation
class AcquireLease(Write[Lease | None]):
    """Take or renew the lease `name` for `ttl` seconds; None while someone else holds it."""

    name: str
    _: KW_ONLY
    holder: str
    ttl: float


@operation
class ReleaseLease(Write[None]):
    """Give the lease up (graceful shutdown)."""

    name: str
    _: KW_ONLY
    holder: str


@operation
class GetLease(Read[Lease | None]):
    """The named lease as stored, expired or not; None if it was never taken."""

    name: str


class Leases(Runs):
    """The store's methods for named leases."""

    acquire_lease = method(AcquireLease)
    release_lease = method(ReleaseLease)
    get_lease = method(GetLease)
