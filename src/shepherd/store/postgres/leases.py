"""Leases and the supervisor's fenced decisions on PostgreSQL: the plans of `store.sql.leases`.

A decision's fence is checked in its own UPDATE (the lease `FOR SHARE`, the
task's row taken with SKIP LOCKED); every decision of a batch is sent, then
all are read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.store.ops import (
    AcquireLease,
    ApplySupervision,
    CancelOverdue,
    ExpiredClaims,
    GetLease,
    NextDeadline,
    ReleaseLease,
)
from shepherd.store.postgres.batch import WRITES
from shepherd.store.postgres.phases import Second, phased
from shepherd.store.postgres.reader import READS, read
from shepherd.store.sql import leases
from shepherd.store.sql.dialect import POSTGRES

if TYPE_CHECKING:
    from datetime import datetime

    from shepherd.core.records import Lease, Task
    from shepherd.store.postgres.batch import PostgresBatch
    from shepherd.store.postgres.reader import Reader

__all__ = ["acquire", "cancel_overdue", "expired_claims", "get_lease", "release", "supervise"]


@phased(AcquireLease)
async def acquire(batch: PostgresBatch, ops: Sequence[AcquireLease]) -> Second:
    """Take or renew leases; None where someone else holds an unexpired one."""
    return await batch.begin(leases.acquire(batch, ops))


@WRITES.handles(ReleaseLease)
async def release(batch: PostgresBatch, ops: Sequence[ReleaseLease]) -> list[object]:
    """Expire leases now, if the caller still holds them."""
    return await batch.run(leases.release(batch, ops))


@WRITES.handles(ApplySupervision)
async def supervise(batch: PostgresBatch, ops: Sequence[ApplySupervision]) -> list[object]:
    """Apply supervisor decisions, fenced by task epoch and leadership."""
    return await batch.run(leases.supervise(batch, ops))


@WRITES.handles(CancelOverdue)
async def cancel_overdue(batch: PostgresBatch, ops: Sequence[CancelOverdue]) -> list[object]:
    """Cancel the tasks whose deadline passed, while their leader leads."""
    return await batch.run(leases.cancel_overdue(batch, ops))


# -- reads ---------------------------------------------------------------------
@READS.handles(ExpiredClaims)
async def expired_claims(reader: Reader, op: ExpiredClaims) -> list[Task]:
    """Claimed tasks whose complete_by has passed, earliest first."""
    return await read(reader, leases.expired_claims(POSTGRES, reader.clock_param(), op))


@READS.handles(GetLease)
async def get_lease(reader: Reader, op: GetLease) -> Lease | None:
    """The named lease as stored, or None."""
    return await read(reader, leases.get_lease(POSTGRES, op))


@READS.handles(NextDeadline)
async def next_deadline(reader: Reader, op: NextDeadline) -> datetime | None:
    """The earliest deadline of the tasks a supervisor would cancel at it, or None."""
    return await read(reader, leases.next_deadline(POSTGRES))
