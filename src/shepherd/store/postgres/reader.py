"""What a PostgreSQL read handler is given: a way to run a query, and the clock to compare with."""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from shepherd.store.dispatch import ReadTable
from shepherd.store.sql.plan import run_async

if TYPE_CHECKING:
    from psycopg.rows import TupleRow

    from shepherd.store.sql.plan import Plan, Query, Rows

__all__ = ["READS", "Reader", "read"]

T = TypeVar("T")


class Reader(Protocol):
    """The store's read side: a pooled connection per query, errors already translated."""

    async def fetch(self, query: Any, params: Sequence[object] = ()) -> list[TupleRow]:
        """Run one query on a pooled connection; its rows as tuples."""
        ...

    def clock_param(self) -> datetime | None:
        """The instant to compare deadlines with: None for the database's `now()`."""
        ...


#: Operation type -> the handler that runs one read.
READS: ReadTable[Reader, Awaitable[Any]] = ReadTable()


async def read(reader: Reader, plan: Plan[T]) -> T:
    """Run a read plan (`store.sql.plan`): each statement on a pooled connection, in turn."""

    async def execute(queries: list[Query]) -> list[Rows]:
        return [await reader.fetch(query.sql, query.params) for query in queries]

    return await run_async(plan, execute)
