"""One group-commit transaction: its connection, its instant, and what it announces.

Handlers of every kind of operation write through a `Batch`. Events are queued
and inserted together at the end; so are the NOTIFYs, one `pg_notify` per
channel, inside the transaction, so that other processes learn of the commit
exactly when it becomes visible.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, final

from psycopg.rows import tuple_row

from shepherd.core.records import JsonValue
from shepherd.payloads import MAX_PAYLOAD_BYTES, dumps, dumps_error
from shepherd.store import signals as ch
from shepherd.store.dispatch import WriteTable
from shepherd.store.postgres.listener import notifications

if TYPE_CHECKING:
    from psycopg import AsyncCursor
    from psycopg.rows import TupleRow

    from shepherd.store.postgres.connection import Connection

__all__ = ["WRITES", "Batch"]

_INSERT_EVENTS = (
    "INSERT INTO events (task_id, key, reply_to, kind, detail, at) "
    "SELECT e.task_id, e.key, e.reply_to, e.kind, e.detail, %b "
    "FROM unnest(%b::text[], %b::text[], %b::text[], %b::text[], %b::text[]) "
    "WITH ORDINALITY AS e(task_id, key, reply_to, kind, detail, n) ORDER BY e.n"
)
_NOTIFY = "SELECT pg_notify(n.channel, n.payload) FROM unnest(%b::text[], %b::text[]) AS n(channel, payload)"


@final
class Batch:
    """The context every handler of one batch shares.

    Attributes:
        conn: The transaction's connection, in pipeline mode: statements are
            sent at once and their results read when a handler needs them.
        now: The instant of the whole batch (the database's clock, or the
            injected test clock), like SQLite's one `now` per transaction.
        rings: Local channels to ring after commit (and to NOTIFY).
    """

    def __init__(
        self, conn: Connection, now: datetime, *, payload_limit: int = MAX_PAYLOAD_BYTES
    ) -> None:
        self.conn = conn
        self.now = now
        self.payload_limit = payload_limit
        self.rings: set[str] = set()
        self._events: list[tuple[str, str | None, str | None, str, str]] = []

    def dumps(self, value: JsonValue) -> str:
        """Encode a payload as JSON text, within the store's payload limit."""
        return dumps(value, limit=self.payload_limit)

    def dumps_error(self, value: JsonValue) -> str:
        """Encode an error as JSON text, cut (never refused) to the store's payload limit."""
        return dumps_error(value, limit=self.payload_limit)

    async def send(self, query: str, params: Sequence[object] = ()) -> AsyncCursor[TupleRow]:
        """Queue one statement; its results are read later from the cursor.

        Rows are tuples whatever the connection's row factory (a caller's
        connection, in a transactional submit, may have its own).
        """
        return await self.conn.cursor(row_factory=tuple_row).execute(query, params)

    def event(
        self, task_id: str, key: str | None, reply_to: str | None, kind: str, detail: str
    ) -> None:
        """Append an event (detail is JSON text) to the log, at commit, in call order."""
        self._events.append((task_id, key, reply_to, str(kind), detail))

    async def finish(self) -> None:
        """Write the queued events and the NOTIFYs (still inside the transaction)."""
        if self._events:
            columns = list(zip(*self._events, strict=True))
            await self.send(_INSERT_EVENTS, (self.now, *(list(c) for c in columns)))
            self._events.clear()
            self.rings.add(ch.EVENTS)
        pairs = notifications(self.rings)
        if pairs:
            await self.send(_NOTIFY, ([c for c, _ in pairs], [p for _, p in pairs]))


#: Operation type -> the handler that runs every operation of that type in a batch.
WRITES: WriteTable[Batch, Awaitable[list[object]]] = WriteTable()
