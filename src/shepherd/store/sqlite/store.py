"""The embedded SQLite state store: WAL, BEGIN IMMEDIATE, group commit.

One connection lives on one thread (`thread`), which runs every write in
group commits, so many roles' operations share one transaction and one fsync
(`writer`). Several processes may share the file (WAL, busy timeout, short
transactions); a commit wakes their roles through `wakeups`.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar, final

from shepherd.clock import Clock, SystemClock
from shepherd.errors import ConfigError, StoreNotFoundError, StoreUnavailableError
from shepherd.payloads import MAX_PAYLOAD_BYTES
from shepherd.store import ops
from shepherd.store.facade import Facade
from shepherd.store.migrations import check_current, migrations
from shepherd.store.signals import Signals
from shepherd.store.sqlite import retention
from shepherd.store.sqlite.batch import Reading
from shepherd.store.sqlite.connection import connect, inspect, path_from_url
from shepherd.store.sqlite.errors import is_busy, translate
from shepherd.store.sqlite.handlers import READS
from shepherd.store.sqlite.thread import LONE_WAIT, ConnectionThread, LoneDone
from shepherd.store.sqlite.wakeups import Wakeups
from shepherd.store.sqlite.write_lock import WriteLock
from shepherd.store.sqlite.writer import Writer

if TYPE_CHECKING:
    from shepherd.store.contract import NewTask, Submitted

__all__ = ["LONE_KINDS", "SQLiteStore"]

#: Writes that may commit on the event loop when they are lone: a client's
#: submits. A role's writes always go to the thread: a worker's loop has the
#: next step to run while the thread commits, and a loop that committed
#: itself would serialise the two.
LONE_KINDS = (ops.SubmitTask, ops.SubmitTasks)

T = TypeVar("T")
R = TypeVar("R")


@final
class SQLiteStore(Facade):
    """The state store in one SQLite file.

    Args:
        url: `sqlite:///path`.
        clock: The application's clock.
        synchronous: `FULL` or `NORMAL` (see docs/design.md, "Durability").
        store_timeout: Seconds a write may wait for the writers' turn, and
            for SQLite's lock (the busy timeout); past either, its batch fails
            with StoreUnavailableError naming `store_timeout`.
        max_payload_bytes: The most bytes a payload may take as JSON text.
        migrate: True to create the file if it is missing and apply migrations
            when the store opens; False to open only an existing store of this
            code's schema version, refusing anything else with an
            UnusableStoreError before the file is written to.
    """

    def __init__(
        self,
        url: str,
        *,
        clock: Clock | None = None,
        synchronous: str = "FULL",
        store_timeout: float = 5.0,
        max_payload_bytes: int = MAX_PAYLOAD_BYTES,
        migrate: bool = True,
    ) -> None:
        self.payload_limit = max_payload_bytes
        self.migrate = migrate
        self.url = url
        self.path = path_from_url(url)
        self.clock: Clock = clock or SystemClock()
        self.synchronous = synchronous
        self.store_timeout = store_timeout
        self.signals = Signals()
        self.wakeups = Wakeups(self.path, self.signals)
        self._executor: ConnectionThread | None = None
        self._conn: sqlite3.Connection | None = None
        self._writer = Writer(url, self.clock, payload_limit=max_payload_bytes)
        self._turn = WriteLock(self.path, timeout=store_timeout)
        # The connection's busy timeout now (ms); -1 before it is known.
        self._busy_ms = -1

    # -- life cycle --------------------------------------------------------
    async def open(self) -> None:
        if self._executor is not None:
            return
        directory = os.path.dirname(os.path.abspath(self.path))  # noqa: ASYNC240 - no I/O
        if not os.path.isdir(directory):  # noqa: ASYNC240 - one stat, once, at open
            raise StoreUnavailableError(
                f"cannot open SQLite store {self.url!r}: directory {directory!r} does not exist"
            )
        if not self.migrate and not os.path.isfile(self.path):  # noqa: ASYNC240 - one stat, at open
            raise StoreNotFoundError(
                f"no SQLite store at {self.path!r}: the file does not exist (pass --store URL "
                "or set SHEPHERD_STORE; `shepherd run`, `shepherd worker` or `shepherd submit` "
                "creates one)",
                where=f"SQLite file {self.path!r}",
            )
        self._executor = ConnectionThread(
            self._run_batch,
            self._after_commit,
            closed=self.closed_error,
            name="shepherd-sqlite",
            turn=self._turn,
            run_lone=self._run_lone,
            lone_kinds=LONE_KINDS,
            before_job=self._wait_when_busy,
        )
        try:
            await self._call(self._connect)
        except BaseException:
            self._executor.shutdown(wait=False)
            self._executor = None
            raise
        self.wakeups.open()

    def _connect(self) -> None:
        if not self.migrate:
            self._check_schema()
        self._conn = connect(
            self.path,
            busy_timeout=self.store_timeout,
            synchronous=self.synchronous,
            applied_at=self.clock.now().timestamp(),
            migrate_schema=self.migrate,
        )
        self._busy_ms = int(self.store_timeout * 1000)
        self._turn.open()

    def _check_schema(self) -> None:
        """Refuse a file this code cannot use as it is, having written nothing to it.

        A file SQLite cannot read (not a database, a damaged header) fails as
        any damaged store does: StoreDamagedError, through `translate`.
        """
        where = f"SQLite file {self.path!r}"
        found = inspect(self.path, busy_timeout=self.store_timeout)
        check_current(migrations("sqlite"), found, where=where, empty="the file")

    async def close(self) -> None:
        if self._executor is None:
            return
        self.wakeups.close()
        conn = self._conn
        try:
            if conn is not None:
                await self._call(conn.close)
        finally:
            self._executor.shutdown(wait=True)
            self._executor = None
            self._conn = None
            self._turn.close()

    async def _call(self, fn: Callable[[], T]) -> T:
        """Run `fn` on the connection's thread; a `sqlite3` error leaves as a ShepherdError."""
        if self._executor is None:
            await self.open()
        assert self._executor is not None
        try:
            return await self._executor.call(fn)
        except sqlite3.Error as exc:
            raise translate(exc, self.url) from exc

    def now(self) -> datetime:
        return self.clock.now()

    def statistics(self) -> dict[str, float]:
        stats = self._writer.statistics()
        stats["lone_writes"] = 0 if self._executor is None else self._executor.lone
        turn = self._turn
        stats["turn_waits"] = turn.waits
        stats["turn_lone_waits"] = turn.lone_waits
        stats["turn_lone_turns"] = turn.lone_turns
        stats["turn_hand_overs"] = turn.hand_overs
        stats["turn_hand_overs_missed"] = turn.hand_overs_missed
        stats["turn_lingers"] = turn.lingers
        stats["turn_waited_s"] = turn.waited_s
        stats["turn_held_s"] = turn.held_s
        stats.update(self.wakeups.statistics())
        return stats

    # -- operations --------------------------------------------------------
    def queue(self, op: ops.Write[R]) -> Awaitable[R] | None:
        executor = self._executor
        return None if executor is None else executor.write(op)

    def backlog(self) -> int:
        executor = self._executor
        return 0 if executor is None else executor.backlog()

    def _run_batch(self, batch: Sequence[ops.Write[Any]]) -> tuple[list[object], set[str]]:
        """Run `batch` in one transaction, on the connection's thread."""
        conn = self._conn
        if conn is None:
            raise self.closed_error()
        try:
            return self._writer.run(conn, batch)
        except sqlite3.Error as exc:
            raise translate(exc, self.url) from exc

    def _run_lone(self, batch: Sequence[ops.Write[Any]]) -> LoneDone | None:
        """Run `batch` on the event loop if the store is free within `LONE_WAIT`; None if not.

        The writers' turn is looked for on the loop for at most `LONE_WAIT`
        (the holder, seeing the waiters' flag, lets it go at its next commit);
        SQLite's own lock is not waited for (the busy timeout is 0 for the
        BEGIN). So the loop blocks for that look and one commit at most.
        """
        conn = self._conn
        if conn is None:
            return None
        began = time.monotonic()
        if not self._turn.acquire_within(LONE_WAIT):
            return None
        waited = time.monotonic() - began
        try:
            self._set_busy_timeout(conn, 0)
            outcomes, rings = self._writer.run(conn, batch)
            return outcomes, rings, waited
        except sqlite3.Error as exc:
            if is_busy(exc):  # rolled back: nothing was written
                return None
            raise translate(exc, self.url) from exc
        finally:
            self._turn.release()

    def _wait_when_busy(self) -> None:
        """Before each job on the thread: the busy timeout, which lone writes set to 0."""
        conn = self._conn
        if conn is not None:
            self._set_busy_timeout(conn, int(self.store_timeout * 1000))

    def _set_busy_timeout(self, conn: sqlite3.Connection, ms: int) -> None:
        if self._busy_ms != ms:  # a PRAGMA only when it changes
            conn.execute(f"PRAGMA busy_timeout = {ms}")
            self._busy_ms = ms

    def _after_commit(self, rings: set[str]) -> None:
        """On the event loop, once a batch has committed: wake who waits for what it changed."""
        for channel in rings:
            self.signals.ring(channel)
        self.wakeups.announce(rings)

    def closed_error(self) -> StoreUnavailableError:
        return StoreUnavailableError(f"SQLite store {self.url!r} is closed")

    async def read(self, op: ops.Read[R]) -> R:
        handler = READS[type(op)]

        def run() -> Any:
            conn = self._conn
            assert conn is not None
            return handler(Reading(conn, self.clock.now().timestamp()), op)

        # The table is the one untyped seam: READS files each handler under the
        # operation it takes (checked by mypy), and the conformance suite checks
        # what it returns.
        outcome: R = await self._call(run)
        return outcome

    async def submit_task_in(self, task: NewTask, connection: object) -> Submitted:
        """Not supported: SQLite has one writer, so a caller's transaction cannot join it."""
        raise ConfigError(
            "connection",
            "transactional submit (submit(..., connection=...)) needs the PostgreSQL store; "
            "the SQLite store cannot join a caller's transaction",
        )

    async def checkpoint(self) -> None:
        conn = self._conn
        if conn is not None:  # between batches: the connection's thread runs one thing at a time
            await self._call(lambda: retention.checkpoint(conn, self.store_timeout))
