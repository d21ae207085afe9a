"""One group-commit transaction: its connection, its instant, and what it announces.

Handlers of every kind of operation write through a `PostgresBatch`. Events are queued
and inserted together at the end, in one statement with the NOTIFYs (one
`pg_notify` per channel), inside the transaction, so that other processes
learn of the commit exactly when it becomes visible.

The statements of a batch run in one transaction that its single Sync ends
(see `writer`): a handler sends and reads statements, and never commits, begins
a transaction or a pipeline of its own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar, final

from psycopg import AsyncCursor
from psycopg.rows import TupleRow, tuple_row

from shepherd.errors import ShepherdError
from shepherd.payloads import MAX_PAYLOAD_BYTES
from shepherd.store import signals as ch
from shepherd.store.dispatch import WriteTable
from shepherd.store.encoding import Encoding
from shepherd.store.ops import (
    AcquireLease,
    BeatWorker,
    ClaimTasks,
    FinishTask,
    RecordReplies,
    ReplyAndAck,
    ReplyThen,
    StartStep,
    SubmitTask,
    SubmitTasks,
    TakeCalls,
    TakeRequests,
    Write,
)
from shepherd.store.postgres.listener import notifications
from shepherd.store.postgres.rows import utc
from shepherd.store.sql.dialect import POSTGRES
from shepherd.store.sql.plan import run_async

if TYPE_CHECKING:
    from shepherd.store.postgres.connection import Connection
    from shepherd.store.sql.dialect import Dialect
    from shepherd.store.sql.plan import Plan, Query, Rows

T = TypeVar("T")

__all__ = [
    "ALONE",
    "CLOCK_ON_DEMAND",
    "WRITES",
    "Alone",
    "CountedCursor",
    "Later",
    "PostgresBatch",
    "Waits",
]


@final
class Waits:
    """How many times one transaction waited for the server before its commit."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0


@final
class CountedCursor(AsyncCursor[TupleRow]):
    """A pipeline cursor that counts a fetch whose results have not come back yet.

    Such a fetch flushes the pipeline and waits for everything sent so far: one
    round trip. Results that came back with an earlier one are read at once and
    not counted, so `waits` holds the transaction's round trips before its commit.
    """

    def __init__(self, conn: Connection, waits: Waits) -> None:
        super().__init__(conn, row_factory=tuple_row)
        self._waits = waits

    def _count(self) -> None:
        if self.pgresult is None:
            self._waits.count += 1

    async def fetchone(self) -> TupleRow | None:
        """The next row, counting the wait if its results are still on their way."""
        self._count()
        return await super().fetchone()

    async def fetchall(self) -> list[TupleRow]:
        """The remaining rows, counting the wait if their results are still on their way."""
        self._count()
        return await super().fetchall()

    async def fetchmany(self, size: int = 0) -> list[TupleRow]:
        """Rows, counting the wait if their results are still on their way."""
        self._count()
        return await super().fetchmany(size)


#: Operations whose handlers read the batch's instant as a value only through
#: `await PostgresBatch.clock()`, after their first read (or give it only to statements,
#: as `PostgresBatch.instant`): a batch of these alone does not wait for the database's
#: clock in a round trip of its own. Other handlers may read `PostgresBatch.now` at
#: once, so the writer reads the clock before it runs them.
CLOCK_ON_DEMAND: frozenset[type[Write[Any]]] = frozenset(
    {
        SubmitTask,
        SubmitTasks,
        AcquireLease,
        BeatWorker,
        ClaimTasks,
        StartStep,
        ReplyAndAck,
        ReplyThen,
        RecordReplies,
        FinishTask,
        TakeCalls,
        TakeRequests,
    }
)

#: `coalesce(%b::timestamptz, now())` of `PostgresBatch.instant`: the batch's instant in SQL.
INSTANT = "coalesce(%b::timestamptz, now())"

_INSERT_EVENTS = (
    "INSERT INTO events (task_id, key, reply_to, kind, detail, at) "
    f"SELECT e.task_id, e.key, e.reply_to, e.kind, e.detail, {INSTANT} "
    "FROM unnest(%b::text[], %b::text[], %b::text[], %b::text[], %b::text[]) "
    "WITH ORDINALITY AS e(task_id, key, reply_to, kind, detail, n) ORDER BY e.n"
)
_NOTIFY = "SELECT pg_notify(n.channel, n.payload) FROM unnest(%b::text[], %b::text[]) AS n(channel, payload)"
# The events and the NOTIFYs in one statement (a data-modifying WITH always runs whole).
_EVENTS_AND_NOTIFY = f"WITH inserted AS ({_INSERT_EVENTS}) {_NOTIFY}"


@final
class PostgresBatch(Encoding):
    """The context every handler of one batch shares; it encodes payloads (`Encoding`).

    Attributes:
        conn: The transaction's connection, in pipeline mode: statements are
            sent at once and their results read when a handler needs them.
        rings: Local channels to ring after commit (and to NOTIFY).

    Args:
        now: The batch's instant (the injected test clock), or the cursor of the
            transaction's `SELECT now()`, sent first and read when a handler
            first needs the instant (`clock`).
    """

    #: This backend's SQL, for the plans written once for both (`store.sql`).
    dialect: Dialect = POSTGRES

    def __init__(
        self,
        conn: Connection,
        now: datetime | AsyncCursor[TupleRow],
        *,
        payload_limit: int = MAX_PAYLOAD_BYTES,
        waits: Waits | None = None,
    ) -> None:
        super().__init__(payload_limit=payload_limit)
        self.conn = conn
        #: The transaction's round trips before its commit (`CountedCursor`).
        self.waits = Waits() if waits is None else waits
        self._now: datetime | None = None
        self._clock: AsyncCursor[TupleRow] | None = None
        if isinstance(now, datetime):
            self._now = now
        else:
            self._clock = now
        self.rings: set[str] = set()
        self._events: list[tuple[str, str | None, str | None, str, str]] = []

    async def clock(self) -> datetime:
        """The instant of the whole batch, read from the database the first time.

        Like SQLite's one `now` per transaction; on the database's clock it is
        the transaction's `now()`. Its `SELECT now()` went out first, so its
        answer comes back with the first statement a handler reads: awaited
        after that, it costs no round trip of its own.
        """
        if self._now is None:
            assert self._clock is not None, "a batch has its instant or its clock's cursor"
            row = await self._clock.fetchone()
            if row is None:  # pragma: no cover - SELECT now() returns one row
                raise ShepherdError("PostgreSQL did not tell the time")
            (database_now,) = row
            self._now, self._clock = utc(database_now), None
        return self._now

    @property
    def now(self) -> datetime:
        """The batch's instant, once read (`clock`).

        Raises:
            ShepherdError: Not read yet: a handler of an operation in
                `CLOCK_ON_DEMAND` must await `clock()` before it reads `now`.
        """
        if self._now is None:
            raise ShepherdError(
                "a PostgreSQL batch handler read the batch's instant before it was read: "
                "handlers of CLOCK_ON_DEMAND operations await PostgresBatch.clock() first"
            )
        return self._now

    @property
    def instant(self) -> datetime | None:
        """The batch's instant as a statement parameter, read in SQL as `INSTANT`.

        None stands for the transaction's `now()` while it is not read yet: the
        same instant.
        """
        return self._now

    async def send(self, query: str, params: Sequence[object] = ()) -> AsyncCursor[TupleRow]:
        """Queue one statement; its results are read later from the cursor.

        Rows are tuples whatever the connection's row factory (a caller's
        connection, in a transactional submit, may have its own).
        """
        return await CountedCursor(self.conn, self.waits).execute(query, params)

    async def run(self, plan: Plan[T]) -> T:
        """Run a plan (`store.sql.plan`): each yield's statements sent at once, then read."""
        return await run_async(plan, self._execute)

    async def begin(self, plan: Plan[T]) -> Callable[[], Awaitable[T]]:
        """Send a plan's first statements; what reads them and runs the rest (`phases`)."""
        try:
            queries = next(plan)
        except StopIteration as done:
            value: T = done.value
            queries = None
        if queries is None:

            async def ended() -> T:
                return value

            return ended
        sent = await self._send_all(queries)

        async def rest() -> T:
            rows = await self._read_all(queries, sent)
            try:
                while True:
                    rows = await self._execute(plan.send(rows))
            except StopIteration as done:
                outcome: T = done.value
                return outcome

        return rest

    async def _execute(self, queries: list[Query]) -> list[Rows]:
        return await self._read_all(queries, await self._send_all(queries))

    async def _send_all(self, queries: list[Query]) -> list[list[AsyncCursor[TupleRow]]]:
        return [
            [await self.send(query.sql, params) for params in query.params]
            if query.many
            else [await self.send(query.sql, query.params)]
            for query in queries
        ]

    async def _read_all(
        self, queries: list[Query], sent: list[list[AsyncCursor[TupleRow]]]
    ) -> list[Rows]:
        out: list[Rows] = []
        if self._clock is not None and any(query.rows for query in queries):
            # Sent first, it comes back with these rows: the plan's next statements may read `now`.
            await self.clock()
        for query, cursors in zip(queries, sent, strict=True):
            if not query.rows:
                out.append([])
            elif query.many:  # `{changed}`: each statement returns a row per row changed
                out.append([(sum([len(await cursor.fetchall()) for cursor in cursors]),)])
            else:
                out.append(await cursors[0].fetchall())
        return out

    async def scalar(self, query: str, params: Sequence[object] = ()) -> Any:
        """Run one statement now: its first row's one column, or None if it returns no row."""
        row = await (await self.send(query, params)).fetchone()
        if row is None:
            return None
        (value,) = row
        return value

    def event(
        self, task_id: str, key: str | None, reply_to: str | None, kind: str, detail: str
    ) -> None:
        """Append an event (detail is JSON text) to the log, at commit, in call order."""
        self._events.append((task_id, key, reply_to, str(kind), detail))

    async def finish(self) -> None:
        """Write the queued events and the NOTIFYs (still inside the transaction), in one statement."""
        events: tuple[object, ...] = ()
        if self._events:
            columns = list(zip(*self._events, strict=True))
            events = (self.instant, *(list(c) for c in columns))
            self._events.clear()
            self.rings.add(ch.EVENTS)
        pairs = notifications(self.rings)
        notify = ([c for c, _ in pairs], [p for _, p in pairs])
        if events and pairs:
            await self.send(_EVENTS_AND_NOTIFY, (*events, *notify))
        elif events:
            await self.send(_INSERT_EVENTS, events)
        elif pairs:
            await self.send(_NOTIFY, notify)


@final
@dataclass(frozen=True, slots=True)
class Later:
    """An outcome a handler builds only after the commit, from rows its statements returned.

    The Sync that commits the batch brings every statement's results back, so
    a handler that needs rows only for its caller's outcome (not to decide what
    else to write) returns one of these instead of reading them in a round
    trip of its own; the writer awaits `read` once the batch has committed.
    """

    read: Callable[[], Awaitable[object]]


#: Operation type -> the handler that runs every operation of that type in a batch.
WRITES: WriteTable[PostgresBatch, Awaitable[list[object]]] = WriteTable()


@final
@dataclass(frozen=True, slots=True)
class Alone:
    """One operation written whole by ONE statement that carries its own commit.

    The writer sends it alone, outside pipeline mode, as an implicit
    transaction: one round trip, where a batch takes two (its statements, then
    the commit). The statement returns one row whose first column is the
    transaction's `now()`.

    Attributes:
        query: The statement: the rows, the events and the NOTIFYs together.
        params: Its parameters.
        outcome: The operation's outcome once the statement has succeeded.
        rings: The local channels to ring after it.
    """

    query: str
    params: tuple[object, ...]
    outcome: object
    rings: frozenset[str]


#: Operation type -> how one operation of it, alone in its batch, is written by
#: one statement (`Alone`), or None when that operation needs a batch after all
#: (a key to look up, an input that does not encode). Only for operations a
#: busy client sends one at a time: a lone `submit`.
ALONE: dict[type[Write[Any]], Callable[[Any, Encoding, datetime | None], Alone | None]] = {}
