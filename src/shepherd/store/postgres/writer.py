"""The group-commit writer: one connection, one transaction per batch.

The group committer hands over every operation waiting at that moment; the
writer runs them, grouped by kind, in ONE transaction on its own connection,
in pipeline mode, then rings the local channels. Statements go out as they are
sent and their results are read when a handler needs them; the one Sync at the
end commits them all (PostgreSQL runs the statements before a Sync as one
implicit transaction, rolled back whole if one fails). The batch's first
statement asks for the database's clock; its answer comes back with the first
statement a handler reads (`PostgresBatch.clock`: handlers of `batch.CLOCK_ON_DEMAND`
operations read first, then the clock, so that one round trip brings both), or
at once for handlers that may read `PostgresBatch.now` straight away, and always before
the Sync, so that a session found gone then has certainly rolled back. When
every kind in the batch is phased (`phases`), every kind's reads are sent
before any is read: the batch waits once for them all, then for the commit.
The waits before the commit are counted (`round_trips`). An outcome built from rows read after the commit (`batch.Later`)
is read once the Sync has brought them back; if that read fails, its caller
alone gets the error (the batch is committed and is not run again).

What certainly rolled back is retried: a deadlock or serialization failure, or
a connection lost before the Sync was sent. A connection lost after it leaves
the outcome unknown: that batch's callers get CommitUnknownError saying so.
Each transaction runs under a `Deadline` of `store_timeout`: past it the
connection is severed and closed, and the batch is not retried: its callers
get StoreUnavailableError naming `store_timeout`, or CommitUnknownError if the
commit had been asked for. A
row held by another session past the lock timeout fails only the operation
that needed it (StoreUnavailableError): the batch is split and the others
commit. No driver error reaches a caller: the SQLSTATE decides what it
becomes (`sqlstates`): a value the write carried that the server refused (an
index row too large) is a PayloadError, never "unavailable".
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import select
import weakref
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar, final

import psycopg
from psycopg.rows import tuple_row

from shepherd.clock import Clock
from shepherd.errors import CommitUnknownError, StoreUnavailableError
from shepherd.payloads import MAX_PAYLOAD_BYTES
from shepherd.store.encoding import Encoding
from shepherd.store.group_commit import GroupCommitter
from shepherd.store.ops import Write
from shepherd.store.postgres.batch import (
    ALONE,
    CLOCK_ON_DEMAND,
    Alone,
    CountedCursor,
    Later,
    PostgresBatch,
    Waits,
)
from shepherd.store.postgres.connection import Connection, connect, describe, reason
from shepherd.store.postgres.deadline import Deadline, timed_out
from shepherd.store.postgres.handlers import WRITES
from shepherd.store.postgres.phases import phases_of
from shepherd.store.postgres.rows import utc
from shepherd.store.postgres.sqlstates import error_for
from shepherd.store.signals import Signals

__all__ = ["Writer"]

R = TypeVar("R")

#: Deadlock and serialization failures roll the whole transaction back: retry it.
_RETRY_SQLSTATES = frozenset({"40P01", "40001"})
_ATTEMPTS = 5
#: A new task's id drawn again (its random part too): the batch is refused.
_UNIQUE_VIOLATION = "23505"
_TASK_ID = "tasks_pkey"
#: A row lock or an advisory lock not granted within the session's lock_timeout.
_LOCK_NOT_AVAILABLE = "55P03"
#: SQLSTATE classes and codes that mean the session is gone or going: connection
#: exceptions (08), the server shutting down or starting (57P01-57P03), the
#: session ended by `idle_in_transaction_session_timeout` (25P03).
_LOST_CLASSES = ("08",)
_LOST_SQLSTATES = frozenset({"57P01", "57P02", "57P03", "25P03"})
#: The batch's instant on the database's clock: its transaction's start.
_NOW = "SELECT now()"


def _is_lost(exc: psycopg.Error, conn: Connection) -> bool:
    """Whether `exc` means the connection is unusable (rather than one statement failed)."""
    if conn.closed or conn.broken:
        return True
    state = exc.sqlstate
    if state is None:
        # No SQLSTATE: the driver's own complaint (a broken socket, pipeline mode
        # left mid-flight); the connection cannot be trusted any more.
        return isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)
    return state.startswith(_LOST_CLASSES) or state in _LOST_SQLSTATES


#: Writer connections whose server said, while they were idle, that it ends the
#: session: libpq hands an error that arrives between queries (the FATAL of
#: `pg_terminate_backend`, of a shutdown) to the notice handler, and the
#: socket's end may come a moment later. Replaced before the next batch.
_ENDING: weakref.WeakSet[Connection] = weakref.WeakSet()


def _watch(conn: Connection) -> Connection:
    """`conn`, its notices watched for the server's last words (`_ENDING`)."""

    def heard(notice: psycopg.errors.Diagnostic) -> None:
        if notice.severity_nonlocalized in ("FATAL", "PANIC"):
            _ENDING.add(conn)

    conn.add_notice_handler(heard)
    return conn


def _hung_up(conn: Connection) -> bool:
    """Whether the server ended this idle session: its last words or its EOF wait on the socket.

    Looked at before a batch is sent, so that a session ended meanwhile (a
    restart, a terminated backend) is replaced first: a batch that went out
    whole and then met the closed connection could not tell if it committed.
    """
    pgconn = conn.pgconn
    try:
        waiting = select.poll()
        waiting.register(pgconn.socket, select.POLLIN)
        while waiting.poll(0):
            pgconn.consume_input()  # raises at the end of the stream
            pgconn.is_busy()  # parses what came: an error between queries goes to `_watch`
            if pgconn.status != psycopg.pq.ConnStatus.OK:
                return True
    except (psycopg.Error, OSError):
        return True
    return conn in _ENDING


class _ConnectionLostError(Exception):
    """The writer connection broke; `committing` if COMMIT may have been sent.

    `expired` if it broke because its deadline passed (`store_timeout`).
    """

    def __init__(self, cause: BaseException, *, committing: bool, expired: bool) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.committing = committing
        self.expired = expired


@final
class Writer:
    """Runs batches of operations for one store, one transaction at a time.

    Args:
        conninfo: The connection string for (re)connecting.
        url: The store URL, for messages.
        signals: Rung after every commit with the channels the batch touched.
        clock: The local clock.
        database_clock: Whether a batch's instant is the database's `now()`
            (else `clock.now()`, for tests).
        store_timeout: Seconds one transaction may take (see `deadline`).
    """

    def __init__(
        self,
        conninfo: str,
        url: str,
        signals: Signals,
        *,
        clock: Clock,
        database_clock: bool,
        payload_limit: int = MAX_PAYLOAD_BYTES,
        store_timeout: float = 5.0,
    ) -> None:
        self.payload_limit = payload_limit
        self.store_timeout = store_timeout
        #: How a connect that timed out names its timeout (the store sets it).
        self.connect_note = f"store_timeout ({store_timeout:g} s)"
        self._encoding = Encoding(payload_limit=payload_limit)
        self._conninfo = conninfo
        self._url = url
        self._where = describe(url)
        self._signals = signals
        self._clock = clock
        self._database_clock = database_clock
        self._committer = GroupCommitter(self._run_batch)
        self._conn: Connection | None = None
        self._open = False
        self._lock: asyncio.Lock | None = None
        #: The writer connection's backend pid (its NOTIFYs need no delivery here).
        self.pid: int | None = None
        #: The database's clock minus the local one, measured at every batch.
        self.skew = timedelta(0)
        self.commits = 0
        #: Waits for the server before the commit, over the batches committed
        #: (a lone statement's, which is its commit, counts none), and the most
        #: one batch made.
        self.round_trips = 0
        self.most_round_trips = 0
        self.retries = 0
        #: Transactions whose deadline passed (`store_timeout`).
        self.timeouts = 0

    async def start(self, conn: Connection) -> None:
        """Write on `conn` (autocommit) from now on; measure the clock skew."""
        self._set(conn)
        self._open = True
        if self._database_clock:
            before = self._clock.now()
            deadline = Deadline(conn, self.store_timeout)
            try:
                with deadline:
                    cursor = await conn.execute("SELECT clock_timestamp()")
                    row = await cursor.fetchone()
            except psycopg.Error as exc:
                where = f"PostgreSQL store {self._where}"
                raise StoreUnavailableError(
                    timed_out(where, self.store_timeout)
                    if deadline.expired
                    else f"cannot reach {where}: {reason(exc, self._url)}"
                ) from None
            after = self._clock.now()
            if row is not None:
                (database_now,) = row
                self.skew = utc(database_now) - (before + (after - before) / 2)

    async def stop(self) -> None:
        """Let queued operations finish, then close the connection."""
        await self._committer.drain()
        self._open = False
        # A caller cancelled mid-write leaves its batch running: let it end first.
        async with self._guard():
            await self._drop()

    def submit(self, op: Write[R]) -> asyncio.Future[R]:
        """Queue one operation; its outcome once its batch has committed, as a future."""
        return self._committer.submit(op)

    def backlog(self) -> int:
        """Operations queued or in flight."""
        return self._committer.backlog()

    def statistics(self) -> dict[str, float]:
        """Batches, operations, ops per batch, commits, round trips before them, and retries."""
        stats = self._committer.statistics()
        stats["commits"] = self.commits
        stats["round_trips"] = self.round_trips
        stats["most_round_trips"] = self.most_round_trips
        stats["batch_retries"] = self.retries
        stats["writer_timeouts"] = self.timeouts
        return stats

    # -- connection ----------------------------------------------------------
    def _set(self, conn: Connection | None) -> None:
        self._conn = conn
        self.pid = None if conn is None else conn.info.backend_pid

    async def _drop(self) -> None:
        conn = self._conn
        self._set(None)
        if conn is not None:
            with contextlib.suppress(psycopg.Error, OSError):
                await conn.close()

    async def _connection(self) -> Connection:
        conn = self._conn
        if conn is None or conn.closed or conn.broken or _hung_up(conn):
            await self._drop()
            conn = _watch(await connect(self._conninfo, self._url, timeout_note=self.connect_note))
            self._set(conn)
        return conn

    def _guard(self) -> asyncio.Lock:
        if self._lock is None:
            self._lock = asyncio.Lock()
        return self._lock

    # -- batches -------------------------------------------------------------
    async def _run_batch(self, ops: Sequence[Write[Any]]) -> Sequence[object]:
        async with self._guard():
            if not self._open:
                # Queued by callers that gave up before close(): the store is closed.
                closed = StoreUnavailableError(f"PostgreSQL store {self._where} is closed")
                return [closed] * len(ops)
            try:
                outcomes, rings = await self._attempt(ops)
            except StoreUnavailableError:
                raise
            except Exception as exc:
                if len(ops) == 1:
                    raise self._translate(exc) from None
                # One op broke the batch (rolled back): run each alone, so only
                # its caller sees the error.
                outcomes, rings = [], set()
                for op in ops:
                    try:
                        single, more = await self._attempt([op])
                    except Exception as err:
                        outcomes.append(self._translate(err))
                        continue
                    outcomes.append(single[0])
                    rings |= more
        for channel in rings:
            self._signals.ring(channel)
        return outcomes

    def _translate(self, exc: Exception) -> Exception:
        """A caller's error: ShepherdErrors as they are, driver errors by SQLSTATE (`sqlstates`)."""
        if not isinstance(exc, psycopg.Error):
            return exc
        if exc.sqlstate == _UNIQUE_VIOLATION and exc.diag.constraint_name == _TASK_ID:
            return StoreUnavailableError(
                f"PostgreSQL store {self._where}: the id drawn for a new task was already "
                "taken; nothing was written; submit again"
            )
        if exc.sqlstate == _LOCK_NOT_AVAILABLE:
            return StoreUnavailableError(
                f"PostgreSQL store {self._where}: a row this write needs is held by another "
                "session past the lock timeout (a process cut off mid-transaction?); "
                "the write changed nothing and can be retried"
            )
        return error_for(
            exc.sqlstate, f"PostgreSQL store {self._where}", reason(exc, self._url), writing=True
        )

    async def _attempt(self, ops: Sequence[Write[Any]]) -> tuple[list[object], set[str]]:
        """Run `ops` in one transaction, retrying what certainly rolled back."""
        attempt = 0
        while True:
            attempt += 1
            try:
                return await self._transaction(ops)
            except _ConnectionLostError as lost:
                await self._drop()
                if lost.expired:
                    self.timeouts += 1
                    where = f"PostgreSQL store {self._where}"
                    if lost.committing:
                        raise CommitUnknownError(
                            f"{timed_out(where, self.store_timeout)} while committing "
                            "(the outcome is unknown)"
                        ) from None
                    raise StoreUnavailableError(
                        f"{timed_out(where, self.store_timeout)}; nothing was written"
                    ) from None
                if lost.committing:
                    raise CommitUnknownError(
                        f"lost PostgreSQL store {self._where} while committing "
                        f"(the outcome is unknown): {reason(lost.cause, self._url)}"
                    ) from None
                if attempt >= 2:
                    raise StoreUnavailableError(
                        f"lost PostgreSQL store {self._where}: {reason(lost.cause, self._url)}"
                    ) from None
            except psycopg.Error as exc:
                if exc.sqlstate not in _RETRY_SQLSTATES or attempt >= _ATTEMPTS:
                    raise
            self.retries += 1
            await asyncio.sleep(random.uniform(0.0, 0.01 * attempt))

    async def _transaction(self, ops: Sequence[Write[Any]]) -> tuple[list[object], set[str]]:
        grouped: dict[type[Write[Any]], list[int]] = defaultdict(list)
        for index, op in enumerate(ops):
            grouped[type(op)].append(index)
        outcomes: list[object] = [None] * len(ops)
        conn = await self._connection()
        committing = False
        local = self._clock.now()
        if len(ops) == 1 and (alone := self._alone(ops[0], local)) is not None:
            return await self._statement(conn, alone, local)
        deadline = Deadline(conn, self.store_timeout)
        try:
            # One transaction: everything up to the Sync that leaving the pipeline sends.
            with deadline:
                async with conn.pipeline():
                    waits = Waits()
                    if self._database_clock:
                        clock = await CountedCursor(conn, waits).execute(_NOW)
                        batch = PostgresBatch(
                            conn, clock, payload_limit=self.payload_limit, waits=waits
                        )
                        if not CLOCK_ON_DEMAND.issuperset(grouped):
                            await batch.clock()  # a handler may read `now` at once
                    else:
                        batch = PostgresBatch(
                            conn, utc(local), payload_limit=self.payload_limit, waits=waits
                        )
                    phases = phases_of(list(grouped))
                    if phases is not None:  # every read first: one round trip for all
                        seconds = [
                            (kind, await first(batch, [ops[i] for i in grouped[kind]]))
                            for kind, first in phases
                        ]
                        for kind, second in seconds:
                            for i, result in zip(grouped[kind], await second(), strict=True):
                                outcomes[i] = result
                    else:
                        for kind, indexes in grouped.items():
                            results = await WRITES[kind](batch, [ops[i] for i in indexes])
                            for i, result in zip(indexes, results, strict=True):
                                outcomes[i] = result
                    await batch.finish()
                    # The server answers before the commit is asked for (it has if a
                    # handler read anything): a session that is gone fails here, when
                    # the batch certainly rolled back and can be retried.
                    database_now = await batch.clock()
                    committing = True
        except BaseException as exc:
            lost = await self._failed(conn, exc, committing=committing, expired=deadline.expired)
            if lost is not None:
                raise lost from exc
            raise
        self.commits += 1
        self.round_trips += waits.count
        self.most_round_trips = max(self.most_round_trips, waits.count)
        if self._database_clock:
            self.skew = database_now - local
        for i, outcome in enumerate(outcomes):
            if isinstance(outcome, Later):  # its rows came back with the commit
                try:
                    outcomes[i] = await outcome.read()
                except Exception as exc:  # committed: its caller alone hears of it
                    outcomes[i] = exc
        return outcomes, batch.rings

    def _alone(self, op: Write[Any], local: datetime) -> Alone | None:
        """`op` as one statement (`ALONE`), when its kind and its values allow."""
        plan = ALONE.get(type(op))
        if plan is None:
            return None
        return plan(op, self._encoding, None if self._database_clock else utc(local))

    async def _statement(
        self, conn: Connection, alone: Alone, local: datetime
    ) -> tuple[list[object], set[str]]:
        """Run one operation's statement, its own transaction: one round trip.

        Nothing is read before its commit, so a connection lost once it was
        sent leaves the outcome unknown (a session ended while idle is found
        before, by `_connection`).
        """
        deadline = Deadline(conn, self.store_timeout)
        try:
            with deadline:
                cursor = await conn.cursor(row_factory=tuple_row).execute(alone.query, alone.params)
                row = await cursor.fetchone()
        except BaseException as exc:
            lost = await self._failed(conn, exc, committing=True, expired=deadline.expired)
            if lost is not None:
                raise lost from exc
            raise
        self.commits += 1
        if self._database_clock and row is not None:
            self.skew = utc(row[0]) - local
        return [alone.outcome], set(alone.rings)

    async def _failed(
        self, conn: Connection, exc: BaseException, *, committing: bool, expired: bool = False
    ) -> _ConnectionLostError | None:
        """Discard `conn` after a failed transaction; what to raise if it was lost.

        The next batch starts on a new session, whatever the failure: a
        pipeline that fails in the transaction where psycopg first prepares a
        statement leaves psycopg counting that statement as prepared while the
        server has no such statement, and every later use of it on the session
        fails ("prepared statement ... does not exist", 26000), the retry of a
        deadlock first. Failures are rare; a session costs a connect.
        """
        lost = None
        if isinstance(exc, psycopg.Error) and (expired or _is_lost(exc, conn)):  # before the close
            lost = _ConnectionLostError(exc, committing=committing, expired=expired)
        await self._drop()
        return lost
