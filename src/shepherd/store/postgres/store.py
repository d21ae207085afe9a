"""The PostgreSQL state store: a connection pool, group commit, SKIP LOCKED, LISTEN/NOTIFY.

Writes go through the group committer: one writer connection runs many
callers' operations in ONE transaction (pipelined, so a batch costs a few
round trips however large), NOTIFYs the channels it touched, and rings the
local ones after commit. Reads use a small pool. Deadlines are compared with
the database's clock, so processes on machines whose clocks disagree still
agree on when a claim expires.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast, final

import psycopg
from psycopg.rows import tuple_row
from psycopg_pool import AsyncConnectionPool

from shepherd.clock import Clock, SystemClock
from shepherd.core.records import Event, JsonValue, Lease, Reply, Request, Task
from shepherd.core.states import ProcessState
from shepherd.errors import ConfigError, ShepherdError, StoreUnavailableError
from shepherd.payloads import MAX_PAYLOAD_BYTES, dumps
from shepherd.store.breaker_rows import (
    BREAKER_COLUMNS,
    BREAKER_EVENT_COLUMNS,
    breaker_event_from_row,
    breaker_from_row,
)
from shepherd.store.contract import NewTask, StepStart, Submitted
from shepherd.store.postgres import crashes, retention, tasks, workers
from shepherd.store.postgres.batch import Batch
from shepherd.store.postgres.connection import (
    Connection,
    build_conninfo,
    connect,
    describe,
    migrate,
    reason,
)
from shepherd.store.postgres.listener import Listener
from shepherd.store.postgres.rows import (
    EVENT_COLUMNS,
    STEP_COLUMNS_S,
    TASK_COLUMNS,
    TASK_COLUMNS_T,
    TASK_WIDTH,
    event_from_row,
    step_from_row,
    task_from_row,
    utc,
)
from shepherd.store.postgres.writer import Writer
from shepherd.store.signals import Signals
from shepherd.store.task_filters import task_filter
from shepherd.store.worker_rows import worker_from_row

if TYPE_CHECKING:
    from psycopg.rows import TupleRow

    from shepherd.core.breaker import Breaker, BreakerEvent, BreakerPolicy
    from shepherd.core.breaker import Decision as BreakerDecision
    from shepherd.core.retention import Tombstone
    from shepherd.core.supervision import Decision, Escalate, Reset
    from shepherd.core.workers import Worker

__all__ = ["PostgresStore"]

_GET_TASK = (
    f"SELECT {TASK_COLUMNS_T}, {STEP_COLUMNS_S} FROM tasks t "
    "LEFT JOIN steps s ON s.task_id = t.id WHERE t.id = %s ORDER BY s.seq"
)
_COUNT_TASKS = "SELECT process_state, count(*) FROM tasks GROUP BY process_state"
_TASK_EVENTS = f"SELECT {EVENT_COLUMNS} FROM events WHERE task_id = %s ORDER BY id"
# Event ids are taken at insert time but become visible at commit, so event 8
# can be visible before event 7, and a transaction's id (xid) says nothing of
# the order of its inserts either. What is final is this: once every
# transaction older than xid X has ended (X <= the snapshot's xmin), no event
# with an xid below X can ever appear. So readers deliver events in (xid, id)
# order, only below the snapshot's xmin, and a cursor (the last event's xid and
# id) never skips one. No lock is held across a round trip for this: a
# cluster-wide one would let one host cut off mid-transaction stall every writer.
_HORIZON = "xid < pg_snapshot_xmin(pg_current_snapshot())"
_CURSOR_XID = "SELECT xid::text FROM events WHERE id = %s"
# Just below the oldest xid among the events kept after a purged cursor (some of
# them may be delivered again; none is skipped).
_NEXT_XID = "SELECT (min(xid::text::numeric) - 1)::text FROM events WHERE id > %s"
_ALL_EVENTS = (
    f"SELECT {EVENT_COLUMNS} FROM events WHERE (xid, id) > (%s::xid8, %s) AND {_HORIZON} "
    "ORDER BY xid, id LIMIT %s"
)
_EVENTS_FOR = (
    f"SELECT {EVENT_COLUMNS} FROM events WHERE reply_to = %s AND (xid, id) > (%s::xid8, %s) "
    f"AND {_HORIZON} ORDER BY xid, id LIMIT %s"
)
# NULL means "the database's clock"; a test clock passes its own instant.
_EXPIRED = (
    f"SELECT {TASK_COLUMNS} FROM tasks WHERE locked_by IS NOT NULL "
    "AND complete_by < coalesce(%s::timestamptz, now()) ORDER BY complete_by LIMIT %s"
)
_GET_BREAKER = f"SELECT {BREAKER_COLUMNS} FROM breakers WHERE service = %s"
_LIST_BREAKERS = f"SELECT {BREAKER_COLUMNS} FROM breakers ORDER BY service"
_ALL_BREAKER_EVENTS = (
    f"SELECT {BREAKER_EVENT_COLUMNS} FROM breaker_events ORDER BY id DESC LIMIT %s"
)
_BREAKER_EVENTS_FOR = (
    f"SELECT {BREAKER_EVENT_COLUMNS} FROM breaker_events WHERE service = %s "
    "ORDER BY id DESC LIMIT %s"
)


@final
class PostgresStore:
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
        connect_timeout: Seconds to wait for the server before giving up.
        database_clock: Force (True) or forbid (False) the database's clock,
            whatever `clock` is.
        listen_check_interval: Seconds of silence after which the listening
            connection is probed.
        application_name: How the connections appear in `pg_stat_activity`.

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
        connect_timeout: float = 5.0,
        database_clock: bool | None = None,
        listen_check_interval: float = 10.0,
        application_name: str = "shepherd",
        max_payload_bytes: int = MAX_PAYLOAD_BYTES,
    ) -> None:
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
        self.connect_timeout = connect_timeout
        self.signals = Signals()
        self._conninfo = build_conninfo(
            url, connect_timeout=connect_timeout, application_name=application_name
        )
        self._where = describe(url)
        self._pool: AsyncConnectionPool[Connection] | None = None
        self._writer = Writer(
            self._conninfo,
            url,
            self.signals,
            clock=self.clock,
            database_clock=self.database_clock,
            payload_limit=max_payload_bytes,
        )
        self.listener = Listener(
            self._conninfo,
            url,
            self.signals,
            own_pid=lambda: self._writer.pid,
            check_interval=listen_check_interval,
        )
        self._open_lock: asyncio.Lock | None = None

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
        writer = await connect(self._conninfo, self.url, autocommit=False)
        pool: AsyncConnectionPool[Connection] | None = None
        try:
            try:
                await migrate(writer)
                await writer.set_autocommit(True)
            except psycopg.Error as exc:
                raise StoreUnavailableError(
                    f"cannot migrate PostgreSQL store {self._where}: {reason(exc, self.url)}"
                ) from None
            pool = AsyncConnectionPool(
                self._conninfo,
                min_size=self.min_connections,
                max_size=self.max_connections,
                kwargs={"autocommit": True},
                open=False,
                name="shepherd",
                timeout=max(self.connect_timeout, 5.0) * 2,
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
        stats = self._writer.statistics()
        stats.update(self.listener.statistics())
        return stats

    async def _write(self, kind: str, args: Any) -> Any:
        if self._pool is None:
            await self.open()
        return await self._writer.submit(kind, args)

    # -- reads -------------------------------------------------------------
    async def _fetch(self, query: Any, params: Sequence[object] = ()) -> list[TupleRow]:
        pool = self._pool
        if pool is None:
            await self.open()
            pool = self._pool
        if pool is None:  # pragma: no cover - open() raises instead
            raise StoreUnavailableError(f"PostgreSQL store {self._where} is closed")
        try:
            return await _fetch_on(pool, query, params)
        except psycopg.OperationalError:
            # The server dropped our connections (a restart, a network cut): the
            # pool discards the broken ones it finds, then one retry follows.
            with contextlib.suppress(psycopg.Error):  # the retry below reports it
                await pool.check()
        try:
            return await _fetch_on(pool, query, params)
        except psycopg.OperationalError as exc:
            raise StoreUnavailableError(
                f"cannot read PostgreSQL store {self._where}: {reason(exc, self.url)}"
            ) from None
        except psycopg.Error as exc:
            raise ShepherdError(
                f"PostgreSQL store {self._where} refused a read ({exc.sqlstate}): "
                f"{reason(exc, self.url)}"
            ) from None

    def _db_now_param(self) -> datetime | None:
        return None if self.database_clock else self.clock.now()

    # -- application -------------------------------------------------------
    async def submit_task(self, task: NewTask) -> Submitted:
        return await self._write("submit", task)  # type: ignore[no-any-return]

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
        if self._pool is None:
            await self.open()
        # Also begins the caller's transaction if autocommit is off and none is open,
        # so that the block below is a savepoint, never a transaction of its own.
        cursor = await conn.cursor(row_factory=tuple_row).execute("SELECT clock_timestamp()")
        row = await cursor.fetchone()
        now = utc(row[0]) if self.database_clock and row is not None else utc(self.clock.now())
        async with conn.transaction():
            batch = Batch(conn, now, payload_limit=self._writer.payload_limit)
            (outcome,) = await tasks.submit(batch, [task])
            if isinstance(outcome, BaseException):
                raise outcome
            await batch.finish()
        # Rung now, not at the caller's commit: a role that looks too early finds
        # nothing and waits; the NOTIFY wakes it (through the listener) at commit.
        for channel in batch.rings:
            self.signals.ring(channel)
        assert isinstance(outcome, Submitted)
        return outcome

    async def get_task(self, task_id: str) -> Task | None:
        rows = await self._fetch(_GET_TASK, (task_id,))
        if not rows:
            return None
        found = tuple(step_from_row(r[TASK_WIDTH:]) for r in rows if r[TASK_WIDTH] is not None)
        return task_from_row(rows[0][:TASK_WIDTH], found)

    async def list_tasks(
        self,
        *,
        states: Sequence[ProcessState] = (),
        limit: int = 100,
        workflow: str | None = None,
        key: str | None = None,
        id_prefix: str | None = None,
        updated_since: datetime | None = None,
    ) -> list[Task]:
        where, params = task_filter(
            mark="%s",
            states=states,
            workflow=workflow,
            key=key,
            id_prefix=id_prefix,
            updated_since=updated_since,
        )
        query = (
            f"SELECT {TASK_COLUMNS} FROM tasks{where} ORDER BY created_at DESC, id DESC LIMIT %s"
        )
        rows = await self._fetch(query, (*params, tasks.limit_of(limit)))
        return [task_from_row(r) for r in rows]

    async def count_tasks(self) -> dict[ProcessState, int]:
        rows = await self._fetch(_COUNT_TASKS)
        return {ProcessState(r[0]): int(r[1]) for r in rows}

    async def task_events(self, task_id: str) -> list[Event]:
        return [event_from_row(r) for r in await self._fetch(_TASK_EVENTS, (task_id,))]

    async def read_events(
        self, *, reply_to: str | None, after_id: int, limit: int = 1000
    ) -> list[Event]:
        """Events after event `after_id`, in the order they became final (see `_HORIZON`).

        Within one task that is the order they happened in; across tasks, ids
        may come out of numeric order. A cursor whose event is gone (deleted by
        retention) goes on from the events with a higher id (a few of them may
        be delivered again; none is skipped).
        """
        xid = "0"
        if after_id > 0:
            rows = await self._fetch(_CURSOR_XID, (after_id,))
            if rows:
                xid = str(rows[0][0])
            else:  # the cursor's event was purged: go on from the higher ids
                xid = await self._xid_after(after_id)
        n = tasks.limit_of(limit)
        if reply_to is None:
            rows = await self._fetch(_ALL_EVENTS, (xid, after_id, n))
        else:
            rows = await self._fetch(_EVENTS_FOR, (reply_to, xid, after_id, n))
        return [event_from_row(r) for r in rows]

    async def _xid_after(self, after_id: int) -> str:
        """Where a cursor whose event is gone resumes: just before the next event kept."""
        rows = await self._fetch(_NEXT_XID, (after_id,))
        value = rows[0][0] if rows else None
        return "0" if value is None else str(value)

    # -- scheduler ---------------------------------------------------------
    async def claim_tasks(self, *, owner: str, limit: int) -> list[Task]:
        return await self._write("claim", (owner, limit))  # type: ignore[no-any-return]

    async def start_step(self, start: StepStart) -> datetime:
        return await self._write("start_step", start)  # type: ignore[no-any-return]

    async def record_replies(self, *, owner: str, limit: int) -> list[tuple[Reply, bool]]:
        return await self._write("record_replies", (owner, limit))  # type: ignore[no-any-return]

    async def finish_task(self, task_id: str, *, owner: str, epoch: int, result: JsonValue) -> None:
        await self._write("finish", (task_id, owner, epoch, result))

    async def fail_task(
        self,
        task_id: str,
        *,
        owner: str,
        epoch: int,
        state: ProcessState,
        error: JsonValue,
    ) -> None:
        await self._write("fail", (task_id, owner, epoch, state, error))

    async def start_compensation(
        self, task_id: str, *, owner: str, epoch: int, error: JsonValue
    ) -> None:
        await self._write("start_compensation", (task_id, owner, epoch, error))

    async def release_tasks(self, task_ids: Sequence[str], *, owner: str) -> int:
        return await self._write("release", (list(task_ids), owner))  # type: ignore[no-any-return]

    # -- agent -------------------------------------------------------------
    async def take_requests(
        self, *, agents: Sequence[str], worker: str, limit: int, suspects: int = 0
    ) -> list[Request]:
        return await self._write("take", (tuple(agents), worker, limit, suspects))  # type: ignore[no-any-return]

    async def reply_and_ack(
        self, request: Request, *, worker: str, ok: bool, body: JsonValue
    ) -> bool:
        return await self._write("reply", (request, worker, ok, body))  # type: ignore[no-any-return]

    # -- agent: circuit breakers -------------------------------------------
    async def breaker_allow(
        self, service: str, policy: BreakerPolicy
    ) -> tuple[Breaker, BreakerDecision]:
        return await self._write("breaker_allow", (service, policy))  # type: ignore[no-any-return]

    async def breaker_report(
        self, service: str, policy: BreakerPolicy, *, failed: bool
    ) -> tuple[Breaker, Breaker]:
        return await self._write("breaker_report", (service, policy, failed))  # type: ignore[no-any-return]

    async def get_breaker(self, service: str) -> Breaker | None:
        rows = await self._fetch(_GET_BREAKER, (service,))
        return breaker_from_row(rows[0], service, utc) if rows else None

    async def list_breakers(self) -> list[Breaker]:
        return [breaker_from_row(r, r[0], utc) for r in await self._fetch(_LIST_BREAKERS)]

    async def breaker_events(
        self, *, service: str | None = None, limit: int = 50
    ) -> list[BreakerEvent]:
        if service is None:
            rows = await self._fetch(_ALL_BREAKER_EVENTS, (tasks.limit_of(limit),))
        else:
            rows = await self._fetch(_BREAKER_EVENTS_FOR, (service, tasks.limit_of(limit)))
        return [breaker_event_from_row(r, utc) for r in rows]

    # -- supervisor --------------------------------------------------------
    async def acquire_lease(self, name: str, *, holder: str, ttl: float) -> Lease | None:
        return await self._write("lease", (name, holder, ttl))  # type: ignore[no-any-return]

    async def note(self, task_id: str, kind: str, detail: JsonValue) -> None:
        await self._write("note", (task_id, kind, detail))

    # -- agent: heartbeats and done keys -----------------------------------
    async def extend_step(self, request: Request, *, worker: str) -> datetime | None:
        return await self._write("extend_step", (request, worker))  # type: ignore[no-any-return]

    async def begin_once(self, key: str, *, holder: str) -> tuple[str, JsonValue]:
        return await self._write("begin_once", (key, holder))  # type: ignore[no-any-return]

    async def finish_once(self, key: str, *, holder: str, result: JsonValue) -> bool:
        return await self._write("finish_once", (key, holder, result))  # type: ignore[no-any-return]

    async def abandon_once(self, key: str, *, holder: str) -> bool:
        return await self._write("abandon_once", (key, holder))  # type: ignore[no-any-return]

    async def release_lease(self, name: str, *, holder: str) -> None:
        await self._write("release_lease", (name, holder))

    async def expired_claims(self, *, limit: int) -> list[Task]:
        rows = await self._fetch(_EXPIRED, (self._db_now_param(), tasks.limit_of(limit)))
        return [task_from_row(r) for r in rows]

    async def apply_supervision(self, task: Task, decision: Decision, *, leader: Lease) -> bool:
        return await self._write("supervise", (task, decision, leader))  # type: ignore[no-any-return]

    # -- worker registry ---------------------------------------------------
    async def register_worker(
        self,
        instance: str,
        *,
        host: str,
        pid: int,
        roles: Sequence[str],
        agents: Sequence[str],
    ) -> Worker:
        args = (instance, host, pid, tuple(roles), tuple(agents))
        return await self._write("register_worker", args)  # type: ignore[no-any-return]

    async def beat_worker(self, instance: str) -> bool:
        return await self._write("beat_worker", instance)  # type: ignore[no-any-return]

    async def stop_worker(self, instance: str) -> None:
        await self._write("stop_worker", instance)

    async def list_workers(self, *, since: datetime | None = None) -> list[Worker]:
        if since is None:
            rows = await self._fetch(workers.LIST)
        else:
            rows = await self._fetch(workers.LIST_SINCE, (since,))
        return [worker_from_row(r, utc) for r in rows]

    async def dead_workers(self, instances: Sequence[str], *, ttl: float) -> set[str]:
        wanted = set(instances)
        if not wanted:
            return set()
        rows = await self._fetch(workers.ALIVE, (list(wanted), self._db_now_param(), ttl))
        return wanted - {r[0] for r in rows}

    # -- supervisor: crash attribution --------------------------------------
    async def unreaped_workers(self) -> list[Worker]:
        return [worker_from_row(r, utc) for r in await self._fetch(crashes.UNREAPED)]

    async def crash_victims(
        self, instance: str, *, beat_at: datetime
    ) -> list[tuple[Task, bool, int | None]]:
        owner, agent = f"{instance}/s", f"{instance}/a"
        running = {r[0]: int(r[1]) for r in await self._fetch(crashes.RUNNING, (agent, beat_at))}
        rows = await self._fetch(crashes.VICTIMS, (owner, agent, beat_at))
        return [(task_from_row(r), r[7] == owner, running.get(r[0])) for r in rows]

    async def mark_died(self, instance: str) -> bool:
        return await self._write("mark_died", instance)  # type: ignore[no-any-return]

    async def reap_worker(self, instance: str) -> None:
        await self._write("reap_worker", instance)

    async def apply_crash(self, task: Task, decision: Reset | Escalate, *, leader: Lease) -> bool:
        return await self._write("apply_crash", (task, decision, leader))  # type: ignore[no-any-return]

    # -- retention ---------------------------------------------------------
    async def purge_tasks(self, *, ended_before: datetime, limit: int) -> int:
        return await self._write("purge_tasks", (ended_before, limit))  # type: ignore[no-any-return]

    async def purge_tombstones(self, *, purged_before: datetime, limit: int) -> int:
        return await self._write("purge_tombstones", (purged_before, limit))  # type: ignore[no-any-return]

    async def get_tombstone(self, task_id: str) -> Tombstone | None:
        rows = await self._fetch(retention.GET_TOMBSTONE, (task_id,))
        return retention.tombstone_from_row(rows[0]) if rows else None

    async def checkpoint(self) -> None:
        """Nothing to do: the server's checkpointer and autovacuum keep the files in shape."""

    # -- operator ----------------------------------------------------------
    async def retry_task(
        self, task_id: str, *, seq: int | None = None, payload: JsonValue = None
    ) -> Task:
        return await self._write("retry", (task_id, seq, payload))  # type: ignore[no-any-return]

    async def cancel_task(self, task_id: str) -> Task:
        return await self._write("cancel", task_id)  # type: ignore[no-any-return]


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


async def _fetch_on(
    pool: AsyncConnectionPool[Connection], query: Any, params: Sequence[object]
) -> list[TupleRow]:
    async with pool.connection() as conn:
        cursor = await conn.execute(query, params)
        return await cursor.fetchall()
