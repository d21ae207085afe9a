"""Capacity slots: leases on units of a resource's capacity, held across every process.

Taking one locks the resource's row (PostgreSQL) or runs under the write lock
(SQLite), so that at most `capacity` unexpired slots of a resource exist at
any moment, cluster-wide.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import KW_ONLY

from shepherd.core.resources import Slot
from shepherd.store.ops.base import Runs, Write, method, operation

__all__ = ["AcquireSlots", "ReleaseSlots", "RenewSlots", "Slots"]


@operation
class AcquireSlots(Write[tuple[list[str], int | None]]):
    """Take units of `resource`'s capacity for as many `holders` as are free, in order.

    Returns (the holders granted, capacity). A slot is a lease: it lasts
    `lease` seconds (store clock) unless renewed. A holder that holds an
    unexpired slot already keeps it (renewed); the others are granted in
    order while fewer than `capacity` unexpired slots are held, so at most
    `capacity` are held at any moment across every process. A resource
    without a capacity grants every holder without holding anything: (all of
    them, None).

    Raises:
        UnknownResourceError: There is no resource of that name.
    """

    resource: str
    holders: Sequence[str]
    _: KW_ONLY
    worker: str
    lease: float


@operation
class RenewSlots(Write[list[Slot]]):
    """Move every unexpired slot held by `worker` `lease` seconds ahead.

    Returns the slots renewed: a slot of `worker` missing from it expired
    (another holder may have it now).
    """

    _: KW_ONLY
    worker: str
    lease: float


@operation
class ReleaseSlots(Write[int]):
    """Give slots back (rings `signals.SLOTS`); returns how many were still held."""

    slots: Sequence[Slot]


class Slots(Runs):
    """The store's methods for capacity slots."""

    acquire_slots = method(AcquireSlots)
    renew_slots = method(RenewSlots)
    release_slots = method(ReleaseSlots)
