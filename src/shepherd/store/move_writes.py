"""What a move that drains reads and writes, written once for both backends (`resource_writes`).

`DrainPartition` is one look of the mover: it reads the steps in flight on the
partition's resource and, in the same transaction, either moves the partition
(none in flight, or forced) or marks it as being moved (renewing the mark's
lease). Each change of the mark, or of the partition's resource, bumps the
resolver's version: every process then reads the entity's partition again,
and sees that it drains. A renewal changes no answer, and bumps nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shepherd.core.moves import InFlightStep, Moving
from shepherd.errors import PartitionMovingError, UnknownPartitionError, UnknownResourceError
from shepherd.store.ops import DrainPartition, EndPartitionDrain
from shepherd.store.resource_rows import partition_from_row
from shepherd.store.resource_writes import Query, _bump, _get, _write

if TYPE_CHECKING:
    from collections.abc import Generator

    from shepherd.core.resources import Partition
    from shepherd.store.resource_writes import Plan, Rows, Statements, WritePlan, Writing

__all__ = ["MOVE_PLANS"]


def _partition(sql: Statements, name: str) -> Generator[Query, Rows, Partition]:
    """The partition as stored (under the lock: it exists)."""
    rows = yield Query(sql.partition, (name,))
    return partition_from_row(rows[0])


def drain(op: DrainPartition, batch: Writing, sql: Statements) -> Plan:
    """One look of a move: move the partition if nothing is in flight on its resource, else mark it."""
    if (yield from _get(sql, op.resource)) is None:
        return UnknownResourceError(op.resource, partition=op.partition)
    state = yield Query(sql.move_state, (batch.now, op.partition))
    if not state:
        if not op.create:
            return UnknownPartitionError(op.partition)
        yield from _write(batch, sql, sql.put_partition, (op.partition, op.resource, batch.now))
        created = yield from _partition(sql, op.partition)
        return Moving(partition=created, before=None, in_flight=(), moved=True)
    before, moving_to, holder, live = state[0]
    if live and holder != op.holder:
        return PartitionMovingError(op.partition, str(moving_to))
    before = str(before)
    if before == op.resource:
        if moving_to is not None:  # this holder's mark, or a lapsed one: it goes
            yield from _write(batch, sql, sql.put_partition, (op.partition, before, batch.now))
        here = yield from _partition(sql, op.partition)
        return Moving(partition=here, before=before, in_flight=(), moved=True)
    rows = yield Query(sql.in_flight, (op.partition, before))
    in_flight = tuple(
        InFlightStep(task_id=str(t), seq=int(s), agent=str(a), attempt=int(n))  # type: ignore[call-overload]
        for t, s, a, n in rows
    )
    if not in_flight or op.force:
        yield from _write(batch, sql, sql.put_partition, (op.partition, op.resource, batch.now))
        moved = yield from _partition(sql, op.partition)
        return Moving(partition=moved, before=before, in_flight=in_flight, moved=True)
    marked = moving_to == op.resource and holder == op.holder
    yield Query(sql.drain, (op.resource, op.holder, batch.now, op.lease, op.partition), rows=False)
    if not marked:  # a renewal changes no resolution: only a new mark bumps the version
        yield from _bump(batch, sql)
    here = yield from _partition(sql, op.partition)
    return Moving(partition=here, before=before, in_flight=in_flight, moved=False)


def end(op: EndPartitionDrain, batch: Writing, sql: Statements) -> Plan:
    """Take the holder's mark off the partition (it stays where it was)."""
    if not (yield Query(sql.undrain, (op.partition, op.holder))):
        return False
    yield from _bump(batch, sql)
    return True


#: Operation type -> its plan, run as `resource_writes.WRITE_PLANS`' are.
MOVE_PLANS: dict[type[Any], WritePlan] = {DrainPartition: drain, EndPartitionDrain: end}
