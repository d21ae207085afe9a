"""The embedded SQLite state store: WAL, BEGIN IMMEDIATE, group commit.

One connection lives on one thread; every write goes through the group
committer, so many roles' operations share one transaction and one fsync
(`writer`). Several processes may share the file (WAL, busy timeout, short
transactions).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar, final

from shepherd.clock import Clock, SystemClock
from shepherd.core.records import Event, JsonValue, Lease, Reply, Request, Task
from shepherd.core.states import ProcessState
from shepherd.errors import ConfigError, StoreUnavailableError
from shepherd.payloads import MAX_PAYLOAD_BYTES
from shepherd.store.contract import NewTask, StepStart, Submitted
from shepherd.store.group_commit import GroupCommitter, Op
from shepherd.store.signals import Signals
from shepherd.store.sqlite import breakers, crashes, leases, queues, retention, tasks, workers
from shepherd.store.sqlite.connection import connect, path_from_url
from shepherd.store.sqlite.errors import translate
from shepherd.store.sqlite.rows import ts
from shepherd.store.sqlite.writer import Writer
from shepherd.store.task_filters import task_filter

if TYPE_CHECKING:
    from shepherd.core.breaker import Breaker, BreakerEvent, BreakerPolicy
    from shepherd.core.breaker import Decision as BreakerDecision
    from shepherd.core.retention import Tombstone
    from shepherd.core.supervision import Decision, Escalate, Reset
    from shepherd.core.workers import Worker

__all__ = ["SQLiteStore"]

T = TypeVar("T")


@final
class SQLiteStore:
    """The state store in one SQLite file."""

    def __init__(
        self,
        url: str,
        *,
        clock: Clock | None = None,
        synchronous: str = "FULL",
        busy_timeout: float = 30.0,
        max_payload_bytes: int = MAX_PAYLOAD_BYTES,
    ) -> None:
        self.payload_limit = max_payload_bytes
        self.url = url
        self.path = path_from_url(url)
        self.clock: Clock = clock or SystemClock()
        self.synchronous = synchronous
        self.busy_timeout = busy_timeout
        self.signals = Signals()
        self._executor: ThreadPoolExecutor | None = None
        self._conn: sqlite3.Connection | None = None
        self._writer = Writer(url, self.clock, payload_limit=max_payload_bytes)
        self._committer = GroupCommitter(self._run_batch)

    # -- life cycle --------------------------------------------------------
    async def open(self) -> None:
        if self._executor is not None:
            return
        directory = os.path.dirname(os.path.abspath(self.path))  # noqa: ASYNC240 - no I/O
        if not os.path.isdir(directory):  # noqa: ASYNC240 - one stat, once, at open
            raise StoreUnavailableError(
                f"cannot open SQLite store {self.url!r}: directory {directory!r} does not exist"
            )
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="shepherd-sqlite")
        try:
            await self._call(self._connect)
        except BaseException:
            self._executor.shutdown(wait=False)
            self._executor = None
            raise

    def _connect(self) -> None:
        self._conn = connect(
            self.path,
            busy_timeout=self.busy_timeout,
            synchronous=self.synchronous,
            applied_at=self.clock.now().timestamp(),
        )

    async def close(self) -> None:
        if self._executor is None:
            return
        conn = self._conn
        try:
            if conn is not None:
                await self._call(conn.close)
        finally:
            self._executor.shutdown(wait=True)
            self._executor = None
            self._conn = None

    async def _call(self, fn: Callable[[], T]) -> T:
        """Run `fn` on the connection's thread; a `sqlite3` error leaves as a ShepherdError."""
        if self._executor is None:
            await self.open()
        assert self._executor is not None
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, fn)
        except sqlite3.Error as exc:
            raise translate(exc, self.url) from exc

    def now(self) -> datetime:
        return self.clock.now()

    def statistics(self) -> dict[str, float]:
        stats = self._committer.statistics()
        stats["commits"] = self._writer.commits
        return stats

    # -- batching ----------------------------------------------------------
    async def _write(self, kind: str, args: Any) -> Any:
        if self._executor is None:
            await self.open()
        return await self._committer.submit(kind, args)

    async def _run_batch(self, ops: Sequence[Op]) -> Sequence[object]:
        def run() -> tuple[list[object], set[str]]:
            conn = self._conn
            assert conn is not None
            return self._writer.run(conn, ops)

        outcomes, rings = await self._call(run)
        for channel in rings:
            self.signals.ring(channel)
        return outcomes

    async def _read(self, fn: Callable[[sqlite3.Connection, float], T]) -> T:
        def run() -> T:
            conn = self._conn
            assert conn is not None
            return fn(conn, self.clock.now().timestamp())

        return await self._call(run)

    # -- application -------------------------------------------------------
    async def submit_task(self, task: NewTask) -> Submitted:
        return await self._write("submit", task)  # type: ignore[no-any-return]

    async def submit_task_in(self, task: NewTask, connection: object) -> Submitted:
        """Not supported: SQLite has one writer, so a caller's transaction cannot join it."""
        raise ConfigError(
            "connection",
            "transactional submit (submit(..., connection=...)) needs the PostgreSQL store; "
            "the SQLite store cannot join a caller's transaction",
        )

    async def get_task(self, task_id: str) -> Task | None:
        return await self._read(lambda conn, now: tasks.get_task(conn, task_id))

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
            mark="?",
            states=states,
            workflow=workflow,
            key=key,
            id_prefix=id_prefix,
            updated_since=None if updated_since is None else ts(updated_since),
        )
        return await self._read(lambda conn, now: tasks.list_tasks(conn, where, params, limit))

    async def count_tasks(self) -> dict[ProcessState, int]:
        return await self._read(lambda conn, now: tasks.count_tasks(conn))

    async def task_events(self, task_id: str) -> list[Event]:
        return await self._read(lambda conn, now: queues.task_events(conn, task_id))

    async def read_events(
        self, *, reply_to: str | None, after_id: int, limit: int = 1000
    ) -> list[Event]:
        return await self._read(
            lambda conn, now: queues.read_events(
                conn, reply_to=reply_to, after_id=after_id, limit=limit
            )
        )

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
        return await self._read(lambda conn, now: breakers.get_breaker(conn, service))

    async def list_breakers(self) -> list[Breaker]:
        return await self._read(lambda conn, now: breakers.list_breakers(conn))

    async def breaker_events(
        self, *, service: str | None = None, limit: int = 50
    ) -> list[BreakerEvent]:
        return await self._read(lambda conn, now: breakers.breaker_events(conn, service, limit))

    # -- supervisor --------------------------------------------------------
    async def acquire_lease(self, name: str, *, holder: str, ttl: float) -> Lease | None:
        return await self._write("lease", (name, holder, ttl))  # type: ignore[no-any-return]

    async def release_lease(self, name: str, *, holder: str) -> None:
        await self._write("release_lease", (name, holder))

    async def expired_claims(self, *, limit: int) -> list[Task]:
        return await self._read(lambda conn, now: leases.expired_claims(conn, now, limit))

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
        return await self._read(lambda conn, now: workers.list_workers(conn, since))

    async def dead_workers(self, instances: Sequence[str], *, ttl: float) -> set[str]:
        if not instances:
            return set()
        return await self._read(lambda conn, now: workers.dead_workers(conn, now, instances, ttl))

    # -- supervisor: crash attribution --------------------------------------
    async def unreaped_workers(self) -> list[Worker]:
        return await self._read(lambda conn, now: crashes.unreaped_workers(conn))

    async def crash_victims(
        self, instance: str, *, beat_at: datetime
    ) -> list[tuple[Task, bool, int | None]]:
        stamp = beat_at.timestamp()
        return await self._read(lambda conn, now: crashes.crash_victims(conn, instance, stamp))

    async def mark_died(self, instance: str) -> bool:
        return await self._write("mark_died", instance)  # type: ignore[no-any-return]

    async def reap_worker(self, instance: str) -> None:
        await self._write("reap_worker", instance)

    async def apply_crash(self, task: Task, decision: Reset | Escalate, *, leader: Lease) -> bool:
        return await self._write("apply_crash", (task, decision, leader))  # type: ignore[no-any-return]

    # -- retention ---------------------------------------------------------
    async def purge_tasks(self, *, ended_before: datetime, limit: int) -> int:
        return await self._write("purge_tasks", (ended_before.timestamp(), limit))  # type: ignore[no-any-return]

    async def purge_tombstones(self, *, purged_before: datetime, limit: int) -> int:
        return await self._write("purge_tombstones", (purged_before.timestamp(), limit))  # type: ignore[no-any-return]

    async def get_tombstone(self, task_id: str) -> Tombstone | None:
        return await self._read(lambda conn, now: retention.get_tombstone(conn, task_id))

    async def checkpoint(self) -> None:
        conn = self._conn
        if conn is not None:  # between batches: the connection's thread runs one thing at a time
            await self._call(lambda: retention.checkpoint(conn, self.busy_timeout))

    # -- operator ----------------------------------------------------------
    async def retry_task(
        self, task_id: str, *, seq: int | None = None, payload: JsonValue = None
    ) -> Task:
        return await self._write("retry", (task_id, seq, payload))  # type: ignore[no-any-return]

    async def cancel_task(self, task_id: str) -> Task:
        return await self._write("cancel", task_id)  # type: ignore[no-any-return]
