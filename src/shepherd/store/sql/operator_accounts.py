"""Operators' accounts, for both backends: named tokens, added, removed, found, touched.

A token is stored as its SHA-256 only (`shepherd.store.operator_rows`) and
found through the unique index on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.errors import OperatorExistsError, UnknownOperatorError
from shepherd.store.operator_rows import OPERATOR_COLUMNS, operator_from_row
from shepherd.store.sql.plan import Query, each, first, one

if TYPE_CHECKING:
    from shepherd.core.overview import Operator
    from shepherd.store.ops import (
        AddOperator,
        FindOperator,
        ListOperators,
        RemoveOperator,
        TouchOperator,
    )
    from shepherd.store.sql.dialect import Dialect
    from shepherd.store.sql.plan import Plan, Writing

__all__ = ["add", "find", "list_operators", "remove", "touch"]

_ADD = (
    "INSERT INTO operators (name, created_at, last_used_at, token_hash) "
    f"VALUES (?, ?, NULL, ?) ON CONFLICT DO NOTHING RETURNING {OPERATOR_COLUMNS}"
)
_REMOVE = "DELETE FROM operators WHERE name = ? RETURNING name"
_TOUCH = "UPDATE operators SET last_used_at = ? WHERE name = ?"
_LIST = f"SELECT {OPERATOR_COLUMNS} FROM operators ORDER BY name"
_FIND = f"SELECT {OPERATOR_COLUMNS} FROM operators WHERE token_hash = ?"


def add(batch: Writing, ops: Sequence[AddOperator]) -> Plan[list[object]]:
    """Insert operators; a name (or token hash) taken already is refused, nothing written."""
    d = batch.dialect
    sql = d.sql(_ADD)
    added = yield [Query(sql, (op.name, batch.now, op.token_hash)) for op in ops]
    return [
        operator_from_row(rows[0], d.instant) if rows else OperatorExistsError(op.name)
        for op, rows in zip(ops, added, strict=True)
    ]


def remove(batch: Writing, ops: Sequence[RemoveOperator]) -> Plan[list[object]]:
    """Delete operators; an unknown name is refused."""
    sql = batch.dialect.sql(_REMOVE)
    removed = yield [Query(sql, (op.name,)) for op in ops]
    return [
        None if rows else UnknownOperatorError(op.name)
        for op, rows in zip(ops, removed, strict=True)
    ]


def touch(batch: Writing, ops: Sequence[TouchOperator]) -> Plan[list[object]]:
    """Set operators' last use to now."""
    yield [each(batch.dialect.sql(_TOUCH), [(batch.now, op.name) for op in ops])]
    return [None] * len(ops)


# -- reads ---------------------------------------------------------------------
def list_operators(d: Dialect, op: ListOperators) -> Plan[list[Operator]]:
    """Every operator, by name."""
    return [operator_from_row(row, d.instant) for row in (yield from one(d.sql(_LIST)))]


def find(d: Dialect, op: FindOperator) -> Plan[tuple[Operator, str] | None]:
    """The operator with this token hash, and the hash as stored."""
    row = yield from first(d.sql(_FIND), (op.token_hash,))
    return None if row is None else (operator_from_row(row, d.instant), row[3])
