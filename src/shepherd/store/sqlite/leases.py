"""Leases and the supervisor's fenced decisions on SQLite: the plans of `store.sql.leases`.

The batch's transaction holds the write lock, so no new leader can take over
between a decision's fence and its write.
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
from shepherd.store.sql import leases
from shepherd.store.sql.dialect import SQLITE
from shepherd.store.sqlite.batch import READS, WRITES, Reading

if TYPE_CHECKING:
    from datetime import datetime

    from shepherd.core.records import Lease, Task
    from shepherd.store.sqlite.batch import SqliteBatch

__all__ = ["acquire", "cancel_overdue", "expired_claims", "get_lease", "release", "supervise"]


@WRITES.handles(AcquireLease)
def acquire(batch: SqliteBatch, ops: Sequence[AcquireLease]) -> list[object]:
    """Take or renew leases: a Lease, or None while another holder's is unexpired."""
    return batch.run(leases.acquire(batch, ops))


@WRITES.handles(ReleaseLease)
def release(batch: SqliteBatch, ops: Sequence[ReleaseLease]) -> list[object]:
    """Let leases expire now, if their holders still hold them."""
    return batch.run(leases.release(batch, ops))


@WRITES.handles(ApplySupervision)
def supervise(batch: SqliteBatch, ops: Sequence[ApplySupervision]) -> list[object]:
    """Apply supervisor decisions on expired claims: True where the task was changed."""
    return batch.run(leases.supervise(batch, ops))


@WRITES.handles(CancelOverdue)
def cancel_overdue(batch: SqliteBatch, ops: Sequence[CancelOverdue]) -> list[object]:
    """Cancel the tasks whose deadline passed, while their leader leads."""
    return batch.run(leases.cancel_overdue(batch, ops))


# -- reads ---------------------------------------------------------------------
@READS.handles(ExpiredClaims)
def expired_claims(at: Reading, op: ExpiredClaims) -> list[Task]:
    """Claimed tasks whose complete_by has passed, earliest first."""
    return at.run(leases.expired_claims(SQLITE, at.now, op))


@READS.handles(GetLease)
def get_lease(at: Reading, op: GetLease) -> Lease | None:
    """The named lease as stored, or None."""
    return at.run(leases.get_lease(SQLITE, op))


@READS.handles(NextDeadline)
def next_deadline(at: Reading, op: NextDeadline) -> datetime | None:
    """The earliest deadline of the tasks a supervisor would cancel at it, or None."""
    return at.run(leases.next_deadline(SQLITE))
