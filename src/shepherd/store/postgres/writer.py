"""The group-commit writer: one connection, one transaction per batch.

The group committer hands over every operation waiting at that moment; the
writer runs them, grouped by kind, in ONE transaction on its own connection,
in pipeline mode (statements go out together and their results are read when
needed), then rings the local channels. What certainly rolled back is retried:
a deadlock or serialization failure, or a connection lost before COMMIT was
sent. A connection lost during COMMIT leaves the outcome unknown: that batch's
callers get CommitUnknownError saying so. A row held by another session past
the lock timeout fails only the operation that needed it (StoreUnavailableError):
the batch is split and the others commit. No driver error reaches a caller:
what is not a lost or busy store becomes a ShepherdError naming the statement's
complaint.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar, final

import psycopg

from shepherd.clock import Clock
from shepherd.errors import CommitUnknownError, ShepherdError, StoreUnavailableError
from shepherd.payloads import MAX_PAYLOAD_BYTES
from shepherd.store.group_commit import GroupCommitter
from shepherd.store.ops import Write
from shepherd.store.postgres.batch import Batch
from shepherd.store.postgres.connection import Connection, connect, describe, reason
from shepherd.store.postgres.handlers import WRITES
from shepherd.store.postgres.rows import utc
from shepherd.store.signals import Signals

__all__ = ["Writer"]

R = TypeVar("R")

#: Deadlock and serialization failures roll the whole transaction back: retry it.
_RETRY_SQLSTATES = frozenset({"40P01", "40001"})
_ATTEMPTS = 5
#: A row lock or an advisory lock not granted within the session's lock_timeout.
_LOCK_NOT_AVAILABLE = "55P03"
#: SQLSTATE classes and codes that mean the session is gone or going: connection
#: exceptions (08), the server shutting down or starting (57P01-57P03), the
#: session ended by `idle_in_transaction_session_timeout` (25P03).
_LOST_CLASSES = ("08",)
_LOST_SQLSTATES = frozenset({"57P01", "57P02", "57P03", "25P03"})


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


class _ConnectionLostError(Exception):
    """The writer connection broke; `committing` if COMMIT may have been sent."""

    def __init__(self, cause: BaseException, *, committing: bool) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.committing = committing


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
    ) -> None:
        self.payload_limit = payload_limit
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
        self._inflight = 0
        self._idle: asyncio.Event | None = None
        #: The writer connection's backend pid (its NOTIFYs need no delivery here).
        self.pid: int | None = None
        #: The database's clock minus the local one, measured at every batch.
        self.skew = timedelta(0)
        self.commits = 0
        self.retries = 0

    async def start(self, conn: Connection) -> None:
        """Write on `conn` (autocommit) from now on; measure the clock skew."""
        self._set(conn)
        self._open = True
        if self._database_clock:
            before = self._clock.now()
            cursor = await conn.execute("SELECT clock_timestamp()")
            row = await cursor.fetchone()
            after = self._clock.now()
            if row is not None:
                (database_now,) = row
                self.skew = utc(database_now) - (before + (after - before) / 2)

    async def stop(self) -> None:
        """Let queued operations finish, then close the connection."""
        while self._inflight:
            if self._idle is None:
                self._idle = asyncio.Event()
            self._idle.clear()
            await self._idle.wait()
        self._open = False
        # A caller cancelled mid-write leaves its batch running: let it end first.
        async with self._guard():
            await self._drop()

    async def submit(self, op: Write[R]) -> R:
        """Queue one operation; return its outcome once its batch has committed."""
        self._inflight += 1
        try:
            return await self._committer.submit(op)
        finally:
            self._inflight -= 1
            if not self._inflight and self._idle is not None:
                self._idle.set()

    def statistics(self) -> dict[str, float]:
        """Batches, operations, ops per batch, commits, and batches retried."""
        stats = self._committer.statistics()
        stats["commits"] = self.commits
        stats["batch_retries"] = self.retries
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
        if conn is None or conn.closed or conn.broken:
            await self._drop()
            conn = await connect(self._conninfo, self._url)
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
        """A caller's error: ShepherdErrors as they are, driver errors as ShepherdErrors."""
        if not isinstance(exc, psycopg.Error):
            return exc
        if exc.sqlstate == _LOCK_NOT_AVAILABLE:
            return StoreUnavailableError(
                f"PostgreSQL store {self._where}: a row this write needs is held by another "
                "session past the lock timeout (a process cut off mid-transaction?); "
                "the write changed nothing and can be retried"
            )
        if isinstance(exc, psycopg.OperationalError):
            return StoreUnavailableError(
                f"PostgreSQL store {self._where}: {reason(exc, self._url)}"
            )
        return ShepherdError(
            f"PostgreSQL store {self._where} refused a write ({exc.sqlstate}): "
            f"{reason(exc, self._url)}"
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
        try:
            async with conn.pipeline(), conn.transaction():
                batch = Batch(conn, await self._now(conn), payload_limit=self.payload_limit)
                for kind, indexes in grouped.items():
                    results = await WRITES[kind](batch, [ops[i] for i in indexes])
                    for i, result in zip(indexes, results, strict=True):
                        outcomes[i] = result
                await batch.finish()
                committing = True
        except psycopg.Error as exc:
            if _is_lost(exc, conn):
                raise _ConnectionLostError(exc, committing=committing) from exc
            if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                # Still inside the failed transaction (or pipeline): start afresh.
                await self._drop()
            raise
        except BaseException:
            # Cancelled mid-transaction: the next batch starts on a clean connection.
            if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                await self._drop()
            raise
        self.commits += 1
        return outcomes, batch.rings

    async def _now(self, conn: Connection) -> datetime:
        """The batch's instant: the transaction's `now()`, or the test clock's."""
        local = self._clock.now()
        if not self._database_clock:
            return utc(local)
        cursor = await conn.execute("SELECT now()")
        row = await cursor.fetchone()
        if row is None:  # pragma: no cover - SELECT now() returns one row
            raise StoreUnavailableError(f"PostgreSQL store {self._where} did not tell the time")
        (database_now,) = row
        now = utc(database_now)
        self.skew = now - local
        return now
