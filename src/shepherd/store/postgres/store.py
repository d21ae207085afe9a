"""The PostgreSQL state store: a connection pool, group commit, SKIP LOCKED, LISTEN/NOTIFY.

Writes go through the group committer: one writer connection runs many
callers' operations in ONE transaction (pipelined, so a batch costs a few
round trips however large), NOTIFYs the channels it touched, and rings the
local ones after commit. Reads use a small pool. Deadlines are compared with
the database's clock, so processes on machines whose clocks disagree still
agree on when a claim expires. No round trip waits longer than `store_timeout`
(`deadline`): a transaction, a read, a connect, the listener's probe.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar, cast, final

import psycopg
from psycopg.rows import tuple_row
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from shepherd.clock import Clock, SystemClock
from shepherd.errors import ConfigError, ShepherdError, StoreUnavailableError
from shepherd.payloads import MAX_PAYLOAD_BYTES, dumps
from shepherd.store import ops
from shepherd.store.contract import NewTask, Submitted
from shepherd.store.encoding import Encoding
from shepherd.store.facade import Facade
from shepherd.store.migrations import check_current, migrations
from shepherd.store.postgres.batch import PostgresBatch
from shepherd.store.postgres.connection import (
    WRITER_SETTINGS,
    Connection,
    build_conninfo,
    configure,
    connect,
    describe,
    inspect,
    migrate,
    reason,
)
from shepherd.store.postgres.deadline import Deadline, timed_out
from shepherd.store.postgres.handlers import READS, WRITES
from shepherd.store.postgres.listener import Listener
from shepherd.store.postgres.rows import utc
from shepherd.store.postgres.sqlstates import Kind, error_for, kind_of
from shepherd.store.postgres.writer import Writer
from shepherd.store.signals import Signals
from shepherd.store.submits import encode_all
from shepherd.store.wakeups import announced

if TYPE_CHECKING:
    from psycopg.rows import TupleRow

__all__ = ["PostgresStore"]

R = TypeVar("R")


@final
class PostgresStore(Facade):
    """The state store in a PostgreSQL database, shared by many processes and machines.

    Args:
        url: `postgresql://user:password@host:port/dbname` (libpq parameters
            such as `sslmode` may follow as a query string).
        clock: The application's clock. With the system clock (the default),
            deadlines are compared with the database's `now()`; a test clock
            (e.g. `FakeClock`) replaces the database's clock, so tests move time
            on PostgreSQL exactly as on SQLite.
        min_connections: Pooled connections kept open for reads.
        max_connections: Most pooled connections (the writer and the listener
            have one each besides).
        connect_timeout: Seconds to wait for the server before giving up
            (`store_timeout` by default).
        database_clock: Force (True) or forbid (False) the database's clock,
            whatever `clock` is.
        listen_check_interval: Seconds of silence after which the listening
            connection is probed.
        application_name: How the connections appear in `pg_stat_activity`.
        store_timeout: Seconds one round trip may take (a transaction, a read, a
            read connection from the pool); past it the connection is closed and
            the caller gets StoreUnavailableError naming `store_timeout`
            (CommitUnknownError if a commit had been sent).

    Every method of `shepherd.store.contract.Store` is implemented with the
    guarantees that module states; the SQLite store is the reference for return
    values, events and errors.

    Raises:
        StoreUnavailableError: The URL cannot be parsed or the pool size is invalid.
    """

    def __init__(
        self,
        url: str,
        *,
        clock: Clock | None = None,
        min_connections: int = 2,
        max_connections: int = 8,
        connect_timeout: float | None = None,
        database_clock: bool | None = None,
        listen_check_interval: float = 10.0,
        application_name: str = "shepherd",
        max_payload_bytes: int = MAX_PAYLOAD_BYTES,
        store_timeout: float = 5.0,
        migrate: bool = True,
    ) -> None:
        self.migrate = migrate
        if min_connections < 1 or max_connections < min_connections:
            raise StoreUnavailableError(
                f"invalid PostgreSQL pool size {min_connections}..{max_connections}: "
                "need 1 <= min_connections <= max_connections"
            )
        self.url = url
        self.clock: Clock = clock or SystemClock()
        self.database_clock = (
            isinstance(self.clock, SystemClock) if database_clock is None else database_clock
        )
        self.min_connections = min_connections
        self.max_connections = max_connections
        self.store_timeout = store_timeout
        self.connect_timeout = store_timeout if connect_timeout is None else connect_timeout
        connect_timeout = self.connect_timeout
        self.signals = Signals()
        self._conninfo = build_conninfo(
            url, connect_timeout=connect_timeout, application_name=application_name
        )
        self._writer_conninfo = build_conninfo(
            url,
            connect_timeout=connect_timeout,
            application_name=application_name,
            settings=WRITER_SETTINGS,
        )
        self._where = describe(url)
        self._pool: AsyncConnectionPool[Connection] | None = None
        self._writer = Writer(
            self._writer_conninfo,
            url,
            self.signals,
            clock=self.clock,
            database_clock=self.database_clock,
            payload_limit=max_payload_bytes,
            store_timeout=store_timeout,
        )
        if self.connect_timeout != store_timeout:
            self._writer.connect_note = f"the connect timeout ({self.connect_timeout:g} s)"
        self.listener = Listener(
            self._conninfo,
            url,
            self.signals,
            own_pid=lambda: self._writer.pid,
            check_interval=listen_check_interval,
            store_timeout=store_timeout,
        )
        self.signals.watch(self._waited)
        self._open_lock: asyncio.Lock | None = None

    async def listen(self, channels: Iterable[str]) -> None:
        names = {announced(channel) for channel in channels}
        await self.listener.listen(name for name in names if name is not None)

    def _waited(self, channel: str) -> None:
        """A wait on local `channel` began: listen to the announcements that ring it."""
        name = announced(channel)
        if name is not None:
            self.listener.want(name)

    # -- life cycle --------------------------------------------------------
    async def open(self) -> None:
        if self._pool is not None:
            return
        if self._open_lock is None:
            self._open_lock = asyncio.Lock()
        async with self._open_lock:
            if self._pool is None:
                await self._open()

    async def _open(self) -> None:
        writer = await connect(
            self._writer_conninfo,
            self.url,
            autocommit=False,
            timeout_note=self._writer.connect_note,
        )
        pool: AsyncConnectionPool[Connection] | None = None
        try:
            try:
                if self.migrate:
                    await migrate(writer)
                else:
                    found = await inspect(writer)
                    where = f"PostgreSQL database {self._where}"
                    check_current(migrations("postgres"), found, where=where, empty="the database")
                await writer.set_autocommit(True)
            except psycopg.Error as exc:
                if self.migrate:
                    raise self._refused(exc, "migrate", "its migrations") from None
                raise self._refused(exc, "read the schema of", "its schema") from None
            pool = _ReadPool(
                self.store_timeout,
                self._conninfo,
                min_size=self.min_connections,
                max_size=self.max_connections,
                kwargs={"autocommit": True},
                configure=configure,
                open=False,
                name="shepherd",
                timeout=max(self.connect_timeout, 5.0) * 2,
                # psycopg's pool remakes a lost connection with a backoff that
                # doubles without bound until it gives up, after this long: a
                # read after a long outage would wait for the next try, a minute
                # away. Given up sooner, the connection is made afresh, at once,
                # by the next read that finds none free.
                reconnect_timeout=max(_RECONNECT_FLOOR, 2 * self.store_timeout),
            )
            try:
                await pool.open(wait=True, timeout=max(self.connect_timeout, 2.0) + 5.0)
            except psycopg.Error as exc:
                raise StoreUnavailableError(
                    f"cannot reach PostgreSQL store {self._where}: {reason(exc, self.url)}"
                ) from None
            await self.listener.start()
            await self._writer.start(writer)
        except BaseException:
            await self.listener.stop()
            if pool is not None:
                await pool.close()
            await writer.close()
            raise
        self._pool = pool

    async def close(self) -> None:
        pool = self._pool
        if pool is None:
            return
        await self._writer.stop()
        self._pool = None
        await self.listener.stop()
        await pool.close()

    def now(self) -> datetime:
        """The database's clock as this process sees it (the test clock, if injected).

        Every batch measures the offset between the database and the local
        clock, so a local wait for a stored deadline ends when it should.
        """
        return self.clock.now() + self._writer.skew

    def statistics(self) -> dict[str, float]:
        """The writer's and the listener's counters, and the read pool's size and bounds."""
        stats = self._writer.statistics()
        stats.update(self.listener.statistics())
        pool = self._pool
        stats["read_pool_min"] = self.min_connections
        stats["read_pool_max"] = self.max_connections
        stats["read_pool_size"] = 0 if pool is None else pool.get_stats()["pool_size"]
        return stats

    # -- operations --------------------------------------------------------
    def queue(self, op: ops.Write[R]) -> Awaitable[R] | None:
        return None if self._pool is None else self._writer.submit(op)

    def backlog(self) -> int:
        return self._writer.backlog()

    def closed_error(self) -> StoreUnavailableError:
        return StoreUnavailableError(f"PostgreSQL store {self._where} is closed")

    async def read(self, op: ops.Read[R]) -> R:
        # The table is the one untyped seam: READS files each handler under the
        # operation it takes (checked by mypy), and the conformance suite checks
        # what it returns.
        outcome: R = await READS[type(op)](self, op)
        return outcome

    async def fetch(self, query: Any, params: Sequence[object] = ()) -> list[TupleRow]:
        """Run one read on a pooled connection (a `Reader` for the read handlers)."""
        pool = self._pool
        if pool is None:
            await self.open()
            pool = self._pool
        if pool is None:  # pragma: no cover - open() raises instead
            raise self.closed_error()
        try:
            return await self._fetch_on(pool, query, params)
        except _ReadTimeoutError as exc:
            raise StoreUnavailableError(str(exc)) from None
        except psycopg.OperationalError:
            # The server dropped our connections (a restart, a network cut): the
            # pool discards the broken ones it finds, then one retry follows.
            with contextlib.suppress(psycopg.Error):  # the retry below reports it
                await pool.check()
        try:
            return await self._fetch_on(pool, query, params)
        except _ReadTimeoutError as exc:
            raise StoreUnavailableError(str(exc)) from None
        except psycopg.Error as exc:
            raise self._refused(exc, "read", "a read") from None

    def _refused(self, exc: psycopg.Error, doing: str, action: str) -> ShepherdError:
        """The error for a read or a migration that failed with `exc`, by its SQLSTATE."""
        where = f"PostgreSQL store {self._where}"
        if kind_of(exc.sqlstate) is Kind.UNAVAILABLE:
            where = f"cannot {doing} {where}"
        why = reason(exc, self.url)
        return error_for(exc.sqlstate, where, why, writing=False, action=action)

    async def _fetch_on(
        self, pool: AsyncConnectionPool[Connection], query: Any, params: Sequence[object]
    ) -> list[TupleRow]:
        """One read on a pooled connection, under a deadline of `store_timeout`.

        Raises:
            _ReadTimeoutError: No connection came free, or the server did not
                answer, within `store_timeout` (a connection severed by its
                deadline is discarded by the pool when it is given back).
        """
        where = f"PostgreSQL store {self._where}"
        try:
            got = pool.connection(timeout=self.store_timeout)
            async with got as conn:
                deadline = Deadline(conn, self.store_timeout)
                try:
                    with deadline:
                        cursor = await conn.execute(query, params)
                        return await cursor.fetchall()
                except psycopg.Error:
                    if deadline.expired:
                        raise _ReadTimeoutError(timed_out(where, self.store_timeout)) from None
                    raise
        except PoolTimeout:
            raise _ReadTimeoutError(
                f"{where}: no read connection came free within store_timeout "
                f"({self.store_timeout:g} s) (read_pool_max {self.max_connections})"
            ) from None

    def clock_param(self) -> datetime | None:
        """None to compare with the database's `now()`; the test clock's instant otherwise."""
        return None if self.database_clock else self.clock.now()

    async def submit_task_in(self, task: NewTask, connection: object) -> Submitted:
        """Insert the task and its `received` event in the caller's transaction.

        `connection` is the caller's psycopg 3 `AsyncConnection` to this
        store's database, with a transaction open (or autocommit off, so that
        one begins). The statements are the group committer's own
        (`tasks.submit`), run inside a savepoint: if they fail, the savepoint
        is rolled back and the caller's transaction stays usable. A payload
        that is not acceptable JSON raises `PayloadError` before any
        statement is sent. A `pg_notify` queued in the transaction wakes the
        other processes' roles when the caller commits; nothing happens if it
        rolls back.

        Until the caller's transaction ends, `read_events` readers see no event
        written after it began (events are read in commit-safe order): commit
        promptly. Never wait on this store (a submit, a result) inside the
        same transaction.

        Raises:
            ConfigError: `connection` is not a psycopg `AsyncConnection`, has
                no transaction to join (autocommit, idle), or its transaction
                has already failed.
            PayloadError: The input is not acceptable JSON or too large.
            psycopg.Error: A statement failed on the caller's connection.
        """
        conn = _joinable(connection)
        dumps(task.input, limit=self._writer.payload_limit)  # before touching the transaction
        outcome = await self._submit_in(conn, ops.SubmitTask(task=task))
        assert isinstance(outcome, Submitted)
        return outcome

    async def submit_tasks_in(
        self, tasks: Sequence[NewTask], connection: object
    ) -> list[Submitted]:
        """Insert the tasks and their `received` events in the caller's transaction.

        As `submit_task_in`, with the group committer's `tasks.submit_many`:
        every input is encoded before any statement is sent (`PayloadError`
        naming the first refused task's index), then all the tasks are
        inserted in one savepoint, so that they are written all or none. The
        connection is checked even when `tasks` is empty.

        Raises:
            ConfigError: As `submit_task_in`.
            PayloadError: An input is not acceptable JSON or too large.
            psycopg.Error: A statement failed on the caller's connection.
        """
        conn = _joinable(connection)
        encode_all(Encoding(payload_limit=self._writer.payload_limit), tasks)
        if not tasks:
            return []
        outcome = await self._submit_in(conn, ops.SubmitTasks(tasks=tuple(tasks)))
        assert isinstance(outcome, list)
        return outcome

    async def _submit_in(self, conn: Connection, op: ops.SubmitTask | ops.SubmitTasks) -> object:
        """Run one submit operation on the caller's connection, inside a savepoint."""
        if self._pool is None:
            await self.open()
        # Also begins the caller's transaction if autocommit is off and none is open,
        # so that the block below is a savepoint, never a transaction of its own.
        cursor = await conn.cursor(row_factory=tuple_row).execute("SELECT clock_timestamp()")
        row = await cursor.fetchone()
        now = utc(self.clock.now())
        if self.database_clock and row is not None:
            (database_now,) = row
            now = utc(database_now)
        async with conn.transaction():
            batch = PostgresBatch(conn, now, payload_limit=self._writer.payload_limit)
            (outcome,) = await WRITES[type(op)](batch, [op])
            if isinstance(outcome, BaseException):
                raise outcome
            await batch.finish()
        # Rung now, not at the caller's commit: a role that looks too early finds
        # nothing and waits; the NOTIFY wakes it (through the listener) at commit.
        for channel in batch.rings:
            self.signals.ring(channel)
        return outcome

    async def checkpoint(self) -> None:
        """Nothing to do: the server's checkpointer and autovacuum keep the files in shape."""


def _joinable(connection: object) -> Connection:
    """The caller's connection, if it has a transaction a submit can join."""
    if not isinstance(connection, psycopg.AsyncConnection):
        raise ConfigError(
            "connection",
            f"transactional submit needs a psycopg AsyncConnection, not {type(connection).__name__}",
        )
    status = connection.info.transaction_status
    if status == psycopg.pq.TransactionStatus.INERROR:
        raise ConfigError("connection", "its transaction has failed: roll it back first")
    if connection.autocommit and status == psycopg.pq.TransactionStatus.IDLE:
        raise ConfigError(
            "connection",
            "it is in autocommit mode with no transaction open: submit inside "
            "`async with connection.transaction():` (or with autocommit off)",
        )
    return cast("Connection", connection)


#: The least time the read pool keeps trying to remake a lost connection (s).
_RECONNECT_FLOOR = 10.0


class _ReadTimeoutError(Exception):
    """A read met its deadline (`store_timeout`); the message says which."""


class _ReadPool(AsyncConnectionPool[Connection]):
    """The read pool; its check of an idle connection has a deadline too.

    `check()` (after a failed read) tries every idle connection with a round
    trip of its own: on a path that stalls, psycopg's check would wait forever.
    """

    def __init__(self, store_timeout: float, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.store_timeout = store_timeout

    async def check_connection(self, conn: Connection) -> None:  # type: ignore[override]
        with Deadline(conn, self.store_timeout):
            await conn.execute("")
