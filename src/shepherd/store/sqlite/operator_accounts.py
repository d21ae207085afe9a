"""Operators' accounts on SQLite: the plans of `store.sql.operator_accounts`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.store.ops import (
    AddOperator,
    FindOperator,
    ListOperators,
    RemoveOperator,
    TouchOperator,
)
from shepherd.store.sql import operator_accounts
from shepherd.store.sql.dialect import SQLITE
from shepherd.store.sqlite.batch import READS, WRITES, Reading

if TYPE_CHECKING:
    from shepherd.core.overview import Operator
    from shepherd.store.sqlite.batch import SqliteBatch

__all__ = ["add", "find", "list_operators", "remove", "touch"]


@WRITES.handles(AddOperator)
def add(batch: SqliteBatch, ops: Sequence[AddOperator]) -> list[object]:
    """Insert operators; a name (or token hash) taken already is refused, nothing written."""
    return batch.run(operator_accounts.add(batch, ops))


@WRITES.handles(RemoveOperator)
def remove(batch: SqliteBatch, ops: Sequence[RemoveOperator]) -> list[object]:
    """Delete operators; an unknown name is refused."""
    return batch.run(operator_accounts.remove(batch, ops))


@WRITES.handles(TouchOperator)
def touch(batch: SqliteBatch, ops: Sequence[TouchOperator]) -> list[object]:
    """Set operators' last use to now."""
    return batch.run(operator_accounts.touch(batch, ops))


# -- reads ---------------------------------------------------------------------
@READS.handles(ListOperators)
def list_operators(at: Reading, op: ListOperators) -> list[Operator]:
    """Every operator, by name."""
    return at.run(operator_accounts.list_operators(SQLITE, op))


@READS.handles(FindOperator)
def find(at: Reading, op: FindOperator) -> tuple[Operator, str] | None:
    """The operator with this token hash, and the hash as stored."""
    return at.run(operator_accounts.find(SQLITE, op))
