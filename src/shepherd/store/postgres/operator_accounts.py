"""Operators' accounts on PostgreSQL: the plans of `store.sql.operator_accounts`."""

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
from shepherd.store.postgres.batch import WRITES
from shepherd.store.postgres.reader import READS, read
from shepherd.store.sql import operator_accounts
from shepherd.store.sql.dialect import POSTGRES

if TYPE_CHECKING:
    from shepherd.core.overview import Operator
    from shepherd.store.postgres.batch import PostgresBatch
    from shepherd.store.postgres.reader import Reader

__all__ = ["add", "find", "list_operators", "remove", "touch"]


@WRITES.handles(AddOperator)
async def add(batch: PostgresBatch, ops: Sequence[AddOperator]) -> list[object]:
    """Insert operators; a name (or token hash) taken already is refused, nothing written."""
    return await batch.run(operator_accounts.add(batch, ops))


@WRITES.handles(RemoveOperator)
async def remove(batch: PostgresBatch, ops: Sequence[RemoveOperator]) -> list[object]:
    """Delete operators; an unknown name is refused."""
    return await batch.run(operator_accounts.remove(batch, ops))


@WRITES.handles(TouchOperator)
async def touch(batch: PostgresBatch, ops: Sequence[TouchOperator]) -> list[object]:
    """Set operators' last use to now."""
    return await batch.run(operator_accounts.touch(batch, ops))


# -- reads ---------------------------------------------------------------------
@READS.handles(ListOperators)
async def list_operators(reader: Reader, op: ListOperators) -> list[Operator]:
    """Every operator, by name."""
    return await read(reader, operator_accounts.list_operators(POSTGRES, op))


@READS.handles(FindOperator)
async def find(reader: Reader, op: FindOperator) -> tuple[Operator, str] | None:
    """The operator with this token hash, and the hash as stored."""
    return await read(reader, operator_accounts.find(POSTGRES, op))
