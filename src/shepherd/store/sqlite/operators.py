"""Operators' named tokens and the overview's reads: the leadership lease, ended tasks by time.

A token is stored as its SHA-256 only (`shepherd.store.operator_rows`) and
found through the unique index on it. Ended tasks are counted through the
partial indexes that hold only them (`tasks_ended`, `tasks_errors`), so the
overview reads the last hour's tasks, never the live ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.core.records import Lease
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
from shepherd.store.rows import unix_instant
from shepherd.store.sqlite.batch import READS, WRITES, Reading
from shepherd.store.sqlite.rows import ts

if TYPE_CHECKING:
    from shepherd.core.overview import Operator
    from shepherd.store.sqlite.batch import SqliteBatch

__all__ = ["add", "ended_counts", "find", "get_lease", "list_operators", "remove", "touch"]

_ADD = (
    "INSERT INTO operators (name, created_at, last_used_at, token_hash) "
    "VALUES (?, ?, NULL, ?) ON CONFLICT DO NOTHING RETURNING name"
)
_REMOVE = "DELETE FROM operators WHERE name = ? RETURNING name"
_TOUCH = "UPDATE operators SET last_used_at = ? WHERE name = ?"
_LIST = f"SELECT {OPERATOR_COLUMNS} FROM operators ORDER BY name"
_GET = f"SELECT {OPERATOR_COLUMNS} FROM operators WHERE name = ?"
_FIND = f"SELECT {OPERATOR_COLUMNS} FROM operators WHERE token_hash = ?"
_LEASE = "SELECT name, holder, epoch, expires_at FROM leases WHERE name = ?"
# Each predicate repeats its partial index's word for word, as SQLite needs to use it.
_ENDED = (
    "SELECT CAST((updated_at - ?) / ? AS INTEGER), process_state, count(*) "
    "FROM tasks INDEXED BY tasks_ended "
    "WHERE process_state IN ('processed', 'compensated', 'cancelled') AND updated_at >= ? "
    "GROUP BY 1, 2"
)
_ERRORS = (
    "SELECT CAST((updated_at - ?) / ? AS INTEGER), 'error', count(*) "
    "FROM tasks INDEXED BY tasks_errors WHERE process_state = 'error' AND updated_at >= ? "
    "GROUP BY 1"
)


@WRITES.handles(AddOperator)
def add(batch: SqliteBatch, ops: Sequence[AddOperator]) -> list[object]:
    """Insert operators; a name (or token hash) taken already is refused, nothing written."""
    out: list[object] = []
    for op in ops:
        row = batch.conn.execute(_ADD, (op.name, batch.now, op.token_hash)).fetchone()
        if row is None:
            out.append(OperatorExistsError(op.name))
        else:
            found = batch.conn.execute(_GET, (op.name,)).fetchone()
            out.append(operator_from_row(found, unix_instant))
    return out


@WRITES.handles(RemoveOperator)
def remove(batch: SqliteBatch, ops: Sequence[RemoveOperator]) -> list[object]:
    """Delete operators; an unknown name is refused."""
    out: list[object] = []
    for op in ops:
        row = batch.conn.execute(_REMOVE, (op.name,)).fetchone()
        out.append(UnknownOperatorError(op.name) if row is None else None)
    return out


@WRITES.handles(TouchOperator)
def touch(batch: SqliteBatch, ops: Sequence[TouchOperator]) -> list[object]:
    """Set operators' last use to now."""
    for op in ops:
        batch.conn.execute(_TOUCH, (batch.now, op.name))
    return [None] * len(ops)


# -- reads ---------------------------------------------------------------------
@READS.handles(ListOperators)
def list_operators(at: Reading, op: ListOperators) -> list[Operator]:
    """Every operator, by name."""
    return [operator_from_row(row, unix_instant) for row in at.conn.execute(_LIST).fetchall()]


@READS.handles(FindOperator)
def find(at: Reading, op: FindOperator) -> tuple[Operator, str] | None:
    """The operator with this token hash, and the hash as stored."""
    row = at.conn.execute(_FIND, (op.token_hash,)).fetchone()
    return None if row is None else (operator_from_row(row, unix_instant), row[3])


@READS.handles(GetLease)
def get_lease(at: Reading, op: GetLease) -> Lease | None:
    """The named lease as stored, or None."""
    row = at.conn.execute(_LEASE, (op.name,)).fetchone()
    if row is None:
        return None
    name, holder, epoch, expires_at = row
    return Lease(name=name, holder=holder, epoch=epoch, expires_at=unix_instant(expires_at))


@READS.handles(EndedCounts)
def ended_counts(at: Reading, op: EndedCounts) -> dict[tuple[int, ProcessState], int]:
    """Tasks ended since `op.since`, by (slice, state)."""
    since = ts(op.since)
    params = (since, op.bucket, since)
    out: dict[tuple[int, ProcessState], int] = {}
    for query in (_ENDED, _ERRORS):
        for index, state, count in at.conn.execute(query, params).fetchall():
            out[int(index), ProcessState(state)] = int(count)
    return out
