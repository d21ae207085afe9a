"""What a PostgreSQL read handler is given: a way to run a query, and the clock to compare with."""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from shepherd.store.dispatch import ReadTable

if TYPE_CHECKING:
    from psycopg.rows import TupleRow

__all__ = ["READS", "Reader"]


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
