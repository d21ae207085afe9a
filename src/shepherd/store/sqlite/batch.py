"""One group-commit transaction: its connection, its instant, and what it announces.

Handlers of every kind of operation write through a `SqliteBatch`, as the PostgreSQL
store's handlers do through theirs. The transaction began with BEGIN IMMEDIATE,
so it holds the database's write lock: no other process writes between a
handler's reads (the fencing checks) and its writes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar, final

from shepherd.payloads import MAX_PAYLOAD_BYTES
from shepherd.store import signals as ch
from shepherd.store.dispatch import ReadTable, WriteTable
from shepherd.store.encoding import Encoding
from shepherd.store.sql.dialect import SQLITE
from shepherd.store.sql.plan import run

if TYPE_CHECKING:
    from shepherd.store.sql.dialect import Dialect
    from shepherd.store.sql.plan import Plan, Query, Rows

T = TypeVar("T")

__all__ = ["READS", "WRITES", "EventRow", "Reading", "SqliteBatch"]

#: (task_id, key, reply_to, kind, detail as JSON text, at).
EventRow = tuple[str, str | None, str | None, str, str, float]

_INSERT_EVENTS = (
    "INSERT INTO events (task_id, key, reply_to, kind, detail, at) VALUES (?, ?, ?, ?, ?, ?)"
)


@final
class SqliteBatch(Encoding):
    """The context every handler of one batch shares; it encodes payloads (`Encoding`).

    Attributes:
        conn: The connection, inside the batch's transaction.
        now: The instant of the whole batch (the store's clock), unix seconds.
        payload_limit: The most bytes a payload may take as JSON text.
        rings: Local channels to ring after commit.
    """

    __slots__ = ("conn", "now", "rings")

    #: This backend's SQL, for the plans written once for both (`store.sql`).
    dialect: Dialect = SQLITE

    def __init__(
        self, conn: sqlite3.Connection, now: float, *, payload_limit: int = MAX_PAYLOAD_BYTES
    ) -> None:
        super().__init__(payload_limit=payload_limit)
        self.conn = conn
        self.now = now
        self.rings: set[str] = set()

    @property
    def instant(self) -> float:
        """The batch's instant as the parameter of a `{now}` (`store.sql.dialect`)."""
        return self.now

    def run(self, plan: Plan[T]) -> T:
        """Run a plan's statements one after another (`store.sql.plan`): its outcome."""
        return run(plan, _executor(self.conn))

    def events(self, rows: list[EventRow]) -> None:
        """Insert events (their detail is JSON text) into the log, in order."""
        if not rows:
            return
        self.conn.executemany(_INSERT_EVENTS, rows)
        self.rings.add(ch.EVENTS)

    def event(
        self, task_id: str, key: str | None, reply_to: str | None, kind: str, detail: str
    ) -> None:
        """Insert one event (its detail is JSON text) into the log, at the batch's instant."""
        self.events([(task_id, key, reply_to, kind, detail, self.now)])


@final
@dataclass(frozen=True, slots=True)
class Reading:
    """What a read handler gets: the connection (between batches) and the store clock's instant."""

    conn: sqlite3.Connection
    #: Unix seconds.
    now: float

    def run(self, plan: Plan[T]) -> T:
        """Run a read plan's statements one after another (`store.sql.plan`): its outcome."""
        return run(plan, _executor(self.conn))


def _executor(conn: sqlite3.Connection) -> Callable[[Query], Rows]:
    """Runs one statement on `conn`: its rows, as plain tuples."""
    cursor = conn.cursor()
    cursor.row_factory = None

    def execute(query: Query) -> Rows:
        if query.many:
            cursor.executemany(query.sql, query.params)
            return [(cursor.rowcount,)] if query.rows else []
        return cursor.execute(query.sql, query.params).fetchall()

    return execute


#: Operation type -> the handler that runs every operation of that type in a batch.
WRITES: WriteTable[SqliteBatch, list[object]] = WriteTable()
#: Operation type -> the handler that runs one read.
READS: ReadTable[Reading, Any] = ReadTable()
