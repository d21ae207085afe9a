"""Operators' named tokens and the overview's reads: the leadership lease, ended tasks by time.

A token is stored as its SHA-256 only (`shepherd.store.operator_rows`) and
found through the unique index on it. Ended tasks are counted through the
partial indexes that hold only them (`tasks_ended`, `tasks_errors`), so the
overview reads the last hour's tasks, never the live ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.core.states import ProcessState
from shepherd.errors import OperatorExistsError, UnknownOperatorError
from shepherd.store.operator_rows import OPERATOR_COLUMNS, operator_from_row
from shepherd.store.ops import (
    AddOperator,
    EndedCounts,
    FindOperator,
    GetLease,
    ListOperators,
    RemoveOperator,
    TouchOperator,
)
from shepherd.store.postgres.batch import WRITES
from shepherd.store.postgres.reader import READS
from shepherd.store.postgres.rows import lease_from_row, utc
from shepherd.store.rows import LEASE_COLUMNS

if TYPE_CHECKING:
    from shepherd.core.overview import Operator
    from shepherd.core.records import Lease
    from shepherd.store.postgres.batch import PostgresBatch
    from shepherd.store.postgres.reader import Reader

__all__ = ["add", "ended_counts", "find", "get_lease", "list_operators", "remove", "touch"]

_ADD = (
    "INSERT INTO operators (name, created_at, last_used_at, token_hash) "
    f"VALUES (%s, %s, NULL, %s) ON CONFLICT DO NOTHING RETURNING {OPERATOR_COLUMNS}"
)
_REMOVE = "DELETE FROM operators WHERE name = %s RETURNING name"
_TOUCH = "UPDATE operators SET last_used_at = %s WHERE name = %s"
_LIST = f"SELECT {OPERATOR_COLUMNS} FROM operators ORDER BY name"
_FIND = f"SELECT {OPERATOR_COLUMNS} FROM operators WHERE token_hash = %s"
_LEASE = f"SELECT {LEASE_COLUMNS} FROM leases WHERE name = %s"
_SLICE = "floor(extract(epoch FROM updated_at - %s) / %s)::bigint"
_ENDED = (
    f"SELECT {_SLICE}, process_state, count(*) FROM tasks "
    "WHERE process_state IN ('processed', 'compensated', 'cancelled') AND updated_at >= %s "
    "GROUP BY 1, 2 "
    f"UNION ALL SELECT {_SLICE}, 'error', count(*) FROM tasks "
    "WHERE process_state = 'error' AND updated_at >= %s GROUP BY 1"
)


@WRITES.handles(AddOperator)
async def add(batch: PostgresBatch, ops: Sequence[AddOperator]) -> list[object]:
    """Insert operators; a name (or token hash) taken already is refused, nothing written."""
    out: list[object] = []
    for op in ops:
        row = await (await batch.send(_ADD, (op.name, batch.now, op.token_hash))).fetchone()
        if row is None:
            out.append(OperatorExistsError(op.name))
        else:
            out.append(operator_from_row(row, utc))
    return out


@WRITES.handles(RemoveOperator)
async def remove(batch: PostgresBatch, ops: Sequence[RemoveOperator]) -> list[object]:
    """Delete operators; an unknown name is refused."""
    found = await batch.found(_REMOVE, [(op.name,) for op in ops])
    return [
        None if hit else UnknownOperatorError(op.name) for op, hit in zip(ops, found, strict=True)
    ]


@WRITES.handles(TouchOperator)
async def touch(batch: PostgresBatch, ops: Sequence[TouchOperator]) -> list[object]:
    """Set operators' last use to now."""
    for op in ops:
        await batch.send(_TOUCH, (batch.now, op.name))
    return [None] * len(ops)


# -- reads ---------------------------------------------------------------------
@READS.handles(ListOperators)
async def list_operators(reader: Reader, op: ListOperators) -> list[Operator]:
    """Every operator, by name."""
    return [operator_from_row(row, utc) for row in await reader.fetch(_LIST)]


@READS.handles(FindOperator)
async def find(reader: Reader, op: FindOperator) -> tuple[Operator, str] | None:
    """The operator with this token hash, and the hash as stored."""
    rows = await reader.fetch(_FIND, (op.token_hash,))
    return (operator_from_row(rows[0], utc), rows[0][3]) if rows else None


@READS.handles(GetLease)
async def get_lease(reader: Reader, op: GetLease) -> Lease | None:
    """The named lease as stored, or None."""
    rows = await reader.fetch(_LEASE, (op.name,))
    return lease_from_row(rows[0]) if rows else None


@READS.handles(EndedCounts)
async def ended_counts(reader: Reader, op: EndedCounts) -> dict[tuple[int, ProcessState], int]:
    """Tasks ended since `op.since`, by (slice, state)."""
    since, width = op.since, op.bucket
    rows = await reader.fetch(_ENDED, (since, width, since, since, width, since))
    return {(int(index), ProcessState(state)): int(count) for index, state, count in rows}
