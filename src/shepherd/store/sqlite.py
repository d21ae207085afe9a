"""The embedded SQLite state store: WAL, BEGIN IMMEDIATE, group commit.

One connection lives on one thread; every write goes through the group
committer, so many roles' operations share one transaction and one fsync.
Several processes may share the file (WAL, busy timeout, short transactions).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sqlite3
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, final

from shepherd.clock import Clock, SystemClock
from shepherd.core.records import Event, JsonValue, Lease, Reply, Request, Step, Task
from shepherd.core.states import ProcessState
from shepherd.errors import (
    ConfigError,
    InvalidStateError,
    StaleEpochError,
    StoreUnavailableError,
    UnknownTaskError,
)
from shepherd.payloads import MAX_PAYLOAD_BYTES, dumps
from shepherd.store import signals as ch
from shepherd.store import sqlite_crashes, sqlite_retention, sqlite_workers
from shepherd.store.breaker_rows import (
    BREAKER_COLUMNS,
    BREAKER_EVENT_COLUMNS,
    breaker_event_from_row,
    breaker_from_row,
)
from shepherd.store.contract import REPLY_GRACE, NewTask, StepStart, Submitted
from shepherd.store.group_commit import GroupCommitter, Op
from shepherd.store.ids import new_task_id
from shepherd.store.migrations import migrations
from shepherd.store.rows import (
    event_from_row,
    reply_event,
    request_from_row,
    step_from_row,
    taken_reply,
    task_from_row,
    unix_instant,
)
from shepherd.store.signals import Signals
from shepherd.store.sqlite_breakers import HANDLERS as BREAKER_HANDLERS
from shepherd.store.sqlite_errors import is_store_wide, translate
from shepherd.store.sqlite_keys import HANDLERS as KEY_HANDLERS
from shepherd.store.sqlite_keys import clear_started
from shepherd.store.sqlite_workers import HANDLERS as WORKER_HANDLERS
from shepherd.store.task_filters import task_filter

if TYPE_CHECKING:
    from shepherd.core.breaker import Breaker, BreakerEvent, BreakerPolicy
    from shepherd.core.breaker import Decision as BreakerDecision
    from shepherd.core.retention import Tombstone
    from shepherd.core.supervision import Decision, Escalate, Reset
    from shepherd.core.workers import Worker

_TASK_COLUMNS = (
    "id, workflow, key, input, result, error, process_state, locked_by, lock_epoch, "
    "complete_by, complete_within, failure_count, not_before, reply_to, cancel_requested, "
    "created_at, updated_at, crashes, owner_deaths"
)
_STEP_COLUMNS = (
    "task_id, seq, kind, agent, state, attempt, complete_by, request, payload_override, "
    "result, error, undo, compensates"
)
_LOADS = json.loads

log = logging.getLogger("shepherd.store.sqlite")


#: Batch handlers kept in modules of their own, by operation kind.
MORE_HANDLERS = {
    **BREAKER_HANDLERS,
    **KEY_HANDLERS,
    **WORKER_HANDLERS,
    **sqlite_crashes.HANDLERS,
    **sqlite_retention.HANDLERS,
}

#: Bytes the WAL file is cut back to once a checkpoint has emptied it.
JOURNAL_SIZE_LIMIT = 64 * 1024 * 1024


def _ts(value: datetime) -> float:
    return value.timestamp()


def _task(row: tuple[Any, ...], steps: tuple[Step, ...] = ()) -> Task:
    return task_from_row(row, unix_instant, steps)


def _step(row: tuple[Any, ...]) -> Step:
    return step_from_row(row, unix_instant)


def path_from_url(url: str) -> str:
    """The file path of `sqlite:///relative.db` or `sqlite:////abs/path.db`."""
    if not url.startswith("sqlite://"):
        raise StoreUnavailableError(f"not a SQLite URL: {url!r}")
    path = url[len("sqlite://") :]
    if path.startswith("/"):
        path = path[1:]
    if not path:
        raise StoreUnavailableError(f"SQLite URL names no file: {url!r}")
    return path


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
        self._committer = GroupCommitter(self._run_batch)
        self.commits = 0

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
        conn = sqlite3.connect(
            self.path, isolation_level=None, timeout=self.busy_timeout, check_same_thread=False
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(f"PRAGMA synchronous = {self.synchronous}")
            conn.execute(f"PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT}")
            self._migrate(conn)
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    def _migrate(self, conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations "
                "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
            )
            done = {row[0] for row in conn.execute("SELECT version FROM schema_migrations")}
            for version, name, sql in migrations("sqlite"):
                if version in done:
                    continue
                for statement in _split_sql(sql):
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_migrations VALUES (?, ?, ?)",
                    (version, name, self.clock.now().timestamp()),
                )
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise

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

    async def _call(self, fn: Callable[[], Any]) -> Any:
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
        stats["commits"] = self.commits
        return stats

    # -- batching ----------------------------------------------------------
    async def _write(self, kind: str, args: Any) -> Any:
        if self._executor is None:
            await self.open()
        return await self._committer.submit(kind, args)

    async def _run_batch(self, ops: Sequence[Op]) -> Sequence[object]:
        outcomes, rings = await self._call(lambda: self._execute_batch(ops))
        for channel in rings:
            self.signals.ring(channel)
        return outcomes  # type: ignore[no-any-return]

    def _execute_batch(self, ops: Sequence[Op]) -> tuple[list[object], set[str]]:
        conn = self._conn
        assert conn is not None
        now = self.clock.now().timestamp()
        rings: set[str] = set()
        grouped: dict[str, list[int]] = defaultdict(list)
        for index, op in enumerate(ops):
            grouped[op.kind].append(index)
        outcomes: list[object] = [None] * len(ops)
        if conn.in_transaction:  # a rollback that failed earlier: start clean
            _rollback(conn)
        conn.execute("BEGIN IMMEDIATE")
        try:
            for kind, indexes in grouped.items():
                items = [ops[i].args for i in indexes]
                method = getattr(self, f"_b_{kind}", None)
                if method is not None:
                    results = method(conn, items, now, rings)
                else:
                    results = MORE_HANDLERS[kind](self, conn, items, now, rings)
                for i, result in zip(indexes, results, strict=True):
                    outcomes[i] = result
            conn.execute("COMMIT")
            self.commits += 1
        except BaseException as exc:
            _rollback(conn)
            if len(ops) == 1 or not isinstance(exc, Exception) or is_store_wide(exc):
                # A full disk, a damaged file, a lock: every op would meet it alike.
                raise
            # One op broke the batch: run each alone so only that caller sees it.
            outcomes = []
            rings = set()
            for index, op in enumerate(ops):
                try:
                    single, single_rings = self._execute_batch([op])
                    outcomes.append(single[0])
                    rings |= single_rings
                except Exception as err:
                    error = translate(err, self.url)
                    if is_store_wide(err):  # the store failed meanwhile: the rest would too
                        outcomes.extend([error] * (len(ops) - index))
                        break
                    outcomes.append(error)
        return outcomes, rings

    async def _read(self, fn: Callable[[sqlite3.Connection, float], Any]) -> Any:
        def run() -> Any:
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

    def _b_submit(
        self, conn: sqlite3.Connection, items: list[NewTask], now: float, rings: set[str]
    ) -> list[object]:
        out: list[object] = []
        events = []
        for item in items:
            try:
                encoded = dumps(item.input, limit=self.payload_limit)
            except Exception as exc:
                out.append(exc)
                continue
            if item.key is not None:
                purged = sqlite_retention.purged_key(conn, item.workflow, item.key)
                if purged is not None:  # the key's task was purged: it still answers for it
                    out.append(Submitted(task_id=purged, created=False))
                    continue
            task_id = new_task_id()
            cursor = conn.execute(
                "INSERT INTO tasks (id, workflow, key, input, process_state, lock_epoch, "
                "complete_within, failure_count, not_before, reply_to, created_at, updated_at) "
                "VALUES (?, ?, ?, ?, 'pending', 0, ?, 0, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (
                    task_id,
                    item.workflow,
                    item.key,
                    encoded,
                    item.complete_within,
                    now,
                    item.reply_to,
                    now,
                    now,
                ),
            )
            if cursor.rowcount == 0:
                row = conn.execute(
                    "SELECT id FROM tasks WHERE workflow = ? AND key = ?", (item.workflow, item.key)
                ).fetchone()
                out.append(Submitted(task_id=row[0], created=False))
                continue
            events.append(
                (
                    task_id,
                    item.key,
                    item.reply_to,
                    "received",
                    '{"workflow":' + json.dumps(item.workflow) + "}",
                    now,
                )
            )
            out.append(Submitted(task_id=task_id, created=True))
        self._events(conn, events, rings)
        if events:
            rings.add(ch.TASKS)
        return out

    def _events(
        self,
        conn: sqlite3.Connection,
        rows: list[tuple[str, str | None, str | None, str, str, float]],
        rings: set[str],
    ) -> None:
        if not rows:
            return
        conn.executemany(
            "INSERT INTO events (task_id, key, reply_to, kind, detail, at) VALUES (?, ?, ?, ?, ?, ?)",
            rows,
        )
        rings.add(ch.EVENTS)

    async def get_task(self, task_id: str) -> Task | None:
        def run(conn: sqlite3.Connection, now: float) -> Task | None:
            row = conn.execute(
                f"SELECT {_TASK_COLUMNS} FROM tasks WHERE id = ?", (task_id,)
            ).fetchone()
            if row is None:
                return None
            steps = conn.execute(
                f"SELECT {_STEP_COLUMNS} FROM steps WHERE task_id = ? ORDER BY seq", (task_id,)
            ).fetchall()
            return _task(row, tuple(_step(s) for s in steps))

        return await self._read(run)  # type: ignore[no-any-return]

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
            updated_since=None if updated_since is None else _ts(updated_since),
        )

        def run(conn: sqlite3.Connection, now: float) -> list[Task]:
            rows = conn.execute(
                f"SELECT {_TASK_COLUMNS} FROM tasks{where} ORDER BY created_at DESC, id DESC LIMIT ?",
                (*params, limit),
            ).fetchall()
            return [_task(r) for r in rows]

        return await self._read(run)  # type: ignore[no-any-return]

    async def count_tasks(self) -> dict[ProcessState, int]:
        def run(conn: sqlite3.Connection, now: float) -> dict[ProcessState, int]:
            rows = conn.execute(
                "SELECT process_state, count(*) FROM tasks GROUP BY process_state"
            ).fetchall()
            return {ProcessState(r[0]): r[1] for r in rows}

        return await self._read(run)  # type: ignore[no-any-return]

    async def task_events(self, task_id: str) -> list[Event]:
        def run(conn: sqlite3.Connection, now: float) -> list[Event]:
            rows = conn.execute(
                "SELECT id, task_id, key, reply_to, kind, detail, at FROM events "
                "WHERE task_id = ? ORDER BY id",
                (task_id,),
            ).fetchall()
            return [_event(r) for r in rows]

        return await self._read(run)  # type: ignore[no-any-return]

    async def read_events(
        self, *, reply_to: str | None, after_id: int, limit: int = 1000
    ) -> list[Event]:
        def run(conn: sqlite3.Connection, now: float) -> list[Event]:
            if reply_to is None:
                rows = conn.execute(
                    "SELECT id, task_id, key, reply_to, kind, detail, at FROM events "
                    "WHERE id > ? ORDER BY id LIMIT ?",
                    (after_id, limit),
                ).fetchall()
            else:
                rows = conn.execute(
                    "SELECT id, task_id, key, reply_to, kind, detail, at FROM events "
                    "WHERE reply_to = ? AND id > ? ORDER BY id LIMIT ?",
                    (reply_to, after_id, limit),
                ).fetchall()
            return [_event(r) for r in rows]

        return await self._read(run)  # type: ignore[no-any-return]

    # -- scheduler ---------------------------------------------------------
    async def claim_tasks(self, *, owner: str, limit: int) -> list[Task]:
        return await self._write("claim", (owner, limit))  # type: ignore[no-any-return]

    def _b_claim(
        self, conn: sqlite3.Connection, items: list[tuple[str, int]], now: float, rings: set[str]
    ) -> list[object]:
        out: list[object] = []
        for owner, limit in items:
            rows = conn.execute(
                "UPDATE tasks SET locked_by = ?, lock_epoch = lock_epoch + 1, "
                "complete_by = ? + complete_within, updated_at = ?, "
                "process_state = CASE process_state WHEN 'pending' THEN 'processing' "
                "ELSE process_state END "
                "WHERE id IN (SELECT id FROM tasks WHERE locked_by IS NULL "
                "AND process_state IN ('pending', 'compensating') AND not_before <= ? "
                f"ORDER BY not_before LIMIT ?) RETURNING {_TASK_COLUMNS}",
                (owner, now, now, now, limit),
            ).fetchall()
            rows.sort(key=lambda r: r[12])  # RETURNING order is unspecified
            # A task claimed for the first time (epoch 1) has no steps yet.
            older = [r[0] for r in rows if r[8] > 1]
            steps: dict[str, list[Step]] = defaultdict(list)
            for chunk in _chunks(older, 500):
                marks = ",".join("?" * len(chunk))
                for s in conn.execute(
                    f"SELECT {_STEP_COLUMNS} FROM steps WHERE task_id IN ({marks}) ORDER BY seq",
                    chunk,
                ):
                    steps[s[0]].append(_step(s))
            self._events(
                conn,
                [
                    (
                        r[0],
                        r[2],
                        r[13],
                        "claimed",
                        json.dumps({"owner": owner, "lock_epoch": r[8]}),
                        now,
                    )
                    for r in rows
                ],
                rings,
            )
            out.append([_task(r, tuple(steps.get(r[0], ()))) for r in rows])
        return out

    async def start_step(self, start: StepStart) -> datetime:
        return await self._write("start_step", start)  # type: ignore[no-any-return]

    def _b_start_step(
        self, conn: sqlite3.Connection, items: list[StepStart], now: float, rings: set[str]
    ) -> list[object]:
        out: list[object] = []
        steps = []
        requests = []
        touched = []
        superseded = []
        owners = _owners(conn, [s.task_id for s in items])
        for s in items:
            if owners.get(s.task_id) != (s.epoch, s.owner):
                out.append(StaleEpochError(s.task_id, s.epoch))
                continue
            try:
                payload = dumps(s.payload, limit=self.payload_limit)
            except Exception as exc:
                out.append(exc)
                continue
            complete_by = now + s.within + s.queue_allowance
            touched.append((complete_by + REPLY_GRACE, now, s.task_id))
            if s.attempt > 1:
                superseded.append((s.task_id, s.seq))
            steps.append(
                (
                    s.task_id,
                    s.seq,
                    str(s.kind),
                    s.agent,
                    s.attempt,
                    complete_by,
                    payload,
                    s.undo,
                    s.compensates,
                    now,
                )
            )
            requests.append(
                (
                    s.agent,
                    s.task_id,
                    s.seq,
                    s.attempt,
                    s.epoch,
                    str(s.kind),
                    payload,
                    complete_by,
                    float(s.within),
                    None if s.retry is None else json.dumps(s.retry),
                    int(s.suspect),
                    now,
                    now,
                )
            )
            rings.add(ch.REQUESTS)
            out.append(datetime.fromtimestamp(complete_by, UTC))
        if superseded:
            conn.executemany("DELETE FROM requests WHERE task_id = ? AND seq = ?", superseded)
        if touched:
            conn.executemany(
                "UPDATE tasks SET complete_by = ?, updated_at = ? WHERE id = ?", touched
            )
        if steps:
            conn.executemany(
                "INSERT INTO steps (task_id, seq, kind, agent, state, attempt, complete_by, "
                "request, undo, compensates, started_at) "
                "VALUES (?, ?, ?, ?, 'running', ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (task_id, seq) DO UPDATE SET state = 'running', "
                "attempt = excluded.attempt, complete_by = excluded.complete_by, "
                "agent = excluded.agent, kind = excluded.kind, request = excluded.request, "
                "undo = excluded.undo, compensates = excluded.compensates, error = NULL, "
                "started_at = excluded.started_at",
                steps,
            )
            conn.executemany(
                "INSERT INTO requests (agent, task_id, seq, attempt, lock_epoch, kind, payload, "
                "complete_by, within, retry, suspect, visible_at, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                requests,
            )
        return out

    async def record_replies(self, *, owner: str, limit: int) -> list[tuple[Reply, bool]]:
        return await self._write("record_replies", (owner, limit))  # type: ignore[no-any-return]

    def _b_record_replies(
        self,
        conn: sqlite3.Connection,
        items: list[tuple[str, int]],
        now: float,
        rings: set[str],
    ) -> list[object]:
        out: list[object] = []
        for owner, limit in items:
            rows = conn.execute(
                "SELECT r.id, r.task_id, r.seq, r.attempt, r.lock_epoch, r.ok, r.body, "
                "t.lock_epoch, t.key, t.reply_to, s.state, s.attempt, s.agent, s.kind, s.compensates "
                "FROM replies r JOIN tasks t ON t.id = r.task_id "
                "LEFT JOIN steps s ON s.task_id = r.task_id AND s.seq = r.seq "
                "WHERE t.locked_by = ? ORDER BY r.id LIMIT ?",
                (owner, limit),
            ).fetchall()
            taken: list[tuple[Reply, bool]] = []
            completed = []
            failed = []
            compensated = []
            touched = []
            events = []
            for r in rows:
                reply, current = taken_reply(r)
                taken.append((reply, current))
                if not current:
                    continue
                if reply.ok:
                    completed.append((r[6], now, r[1], r[2]))
                    if r[13] == "undo" and r[14] is not None:
                        compensated.append((r[1], r[14]))
                else:
                    failed.append((r[6], now, r[1], r[2]))
                touched.append((now, now, r[1]))
                events.append((r[1], r[8], r[9], *reply_event(r, reply), now))
            if completed:
                conn.executemany(
                    "UPDATE steps SET state = 'completed', result = ?, finished_at = ? "
                    "WHERE task_id = ? AND seq = ?",
                    completed,
                )
            if failed:
                conn.executemany(
                    "UPDATE steps SET state = 'failed', error = ?, finished_at = ? "
                    "WHERE task_id = ? AND seq = ?",
                    failed,
                )
            if compensated:
                conn.executemany(
                    "UPDATE steps SET state = 'compensated' WHERE task_id = ? AND seq = ?",
                    compensated,
                )
            if touched:
                conn.executemany(
                    "UPDATE tasks SET complete_by = ? + complete_within, updated_at = ? WHERE id = ?",
                    touched,
                )
            if rows:
                conn.executemany("DELETE FROM replies WHERE id = ?", [(r[0],) for r in rows])
            self._events(conn, events, rings)
            out.append(taken)
        return out

    async def finish_task(self, task_id: str, *, owner: str, epoch: int, result: JsonValue) -> None:
        await self._write("finish", (task_id, owner, epoch, result))

    def _b_finish(
        self,
        conn: sqlite3.Connection,
        items: list[tuple[str, str, int, JsonValue]],
        now: float,
        rings: set[str],
    ) -> list[object]:
        out: list[object] = []
        events = []
        done = []
        owners = _owners(conn, [item[0] for item in items])
        for task_id, owner, epoch, result in items:
            if owners.get(task_id) != (epoch, owner):
                out.append(StaleEpochError(task_id, epoch))
                continue
            try:
                encoded = dumps(result, limit=self.payload_limit)
            except Exception as exc:
                out.append(exc)
                continue
            done.append((encoded, now, task_id))
            key, reply_to = owners.meta[task_id]
            events.append((task_id, key, reply_to, "processed", '{"result":' + encoded + "}", now))
            rings.add(ch.task_channel(task_id))
            out.append(None)
        conn.executemany(
            "UPDATE tasks SET process_state = 'processed', result = ?, locked_by = NULL, "
            "complete_by = NULL, updated_at = ? WHERE id = ?",
            done,
        )
        self._events(conn, events, rings)
        return out

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

    def _b_fail(
        self,
        conn: sqlite3.Connection,
        items: list[tuple[str, str, int, ProcessState, JsonValue]],
        now: float,
        rings: set[str],
    ) -> list[object]:
        out: list[object] = []
        events = []
        for task_id, owner, epoch, state, error in items:
            encoded = json.dumps(error)
            row = conn.execute(
                "UPDATE tasks SET process_state = ?, error = ?, locked_by = NULL, "
                "complete_by = NULL, updated_at = ? "
                "WHERE id = ? AND lock_epoch = ? AND locked_by = ? RETURNING key, reply_to",
                (str(state), encoded, now, task_id, epoch, owner),
            ).fetchone()
            if row is None:
                out.append(StaleEpochError(task_id, epoch))
                continue
            conn.execute("DELETE FROM requests WHERE task_id = ?", (task_id,))
            events.append((task_id, row[0], row[1], str(state), json.dumps({"error": error}), now))
            rings.add(ch.task_channel(task_id))
            out.append(None)
        self._events(conn, events, rings)
        return out

    async def start_compensation(
        self, task_id: str, *, owner: str, epoch: int, error: JsonValue
    ) -> None:
        await self._write("start_compensation", (task_id, owner, epoch, error))

    def _b_start_compensation(
        self,
        conn: sqlite3.Connection,
        items: list[tuple[str, str, int, JsonValue]],
        now: float,
        rings: set[str],
    ) -> list[object]:
        out: list[object] = []
        events = []
        for task_id, owner, epoch, error in items:
            encoded = json.dumps(error)
            row = conn.execute(
                # failure_count restarts: compensation has its own budget (core.transitions).
                "UPDATE tasks SET process_state = 'compensating', error = ?, failure_count = 0, "
                "updated_at = ? WHERE id = ? AND lock_epoch = ? AND locked_by = ? "
                "RETURNING key, reply_to",
                (encoded, now, task_id, epoch, owner),
            ).fetchone()
            if row is None:
                out.append(StaleEpochError(task_id, epoch))
                continue
            events.append(
                (task_id, row[0], row[1], "compensating", json.dumps({"error": error}), now)
            )
            out.append(None)
        self._events(conn, events, rings)
        return out

    async def release_tasks(self, task_ids: Sequence[str], *, owner: str) -> int:
        return await self._write("release", (list(task_ids), owner))  # type: ignore[no-any-return]

    def _b_release(
        self,
        conn: sqlite3.Connection,
        items: list[tuple[list[str], str]],
        now: float,
        rings: set[str],
    ) -> list[object]:
        out: list[object] = []
        for task_ids, owner in items:
            count = 0
            for chunk in _chunks(task_ids, 500):
                marks = ",".join("?" * len(chunk))
                released = conn.execute(
                    "UPDATE tasks SET locked_by = NULL, lock_epoch = lock_epoch + 1, "
                    "complete_by = NULL, not_before = ?, updated_at = ?, "
                    "process_state = CASE process_state WHEN 'processing' THEN 'pending' "
                    f"ELSE process_state END WHERE locked_by = ? AND id IN ({marks}) RETURNING id",
                    (now, now, owner, *chunk),
                ).fetchall()
                count += len(released)
                # Their queued requests go too: nobody wants those replies any more.
                conn.executemany("DELETE FROM requests WHERE task_id = ?", released)
            if count:
                rings.add(ch.TASKS)
            out.append(count)
        return out

    # -- agent -------------------------------------------------------------
    async def take_requests(
        self, *, agents: Sequence[str], worker: str, limit: int, suspects: int = 0
    ) -> list[Request]:
        return await self._write("take", (tuple(agents), worker, limit, suspects))  # type: ignore[no-any-return]

    def _b_take(
        self,
        conn: sqlite3.Connection,
        items: list[tuple[tuple[str, ...], str, int, int]],
        now: float,
        rings: set[str],
    ) -> list[object]:
        out: list[object] = []
        for agents, worker, limit, suspects in items:
            marks = ",".join("?" * len(agents))
            # Requests of healthy tasks, and at most `suspects` of suspect ones
            # (tasks that crashed a process before): a suspect runs apart from others.
            rows = conn.execute(
                "UPDATE requests SET taken_by = ?, visible_at = complete_by "
                f"WHERE id IN (SELECT id FROM requests WHERE agent IN ({marks}) "
                "AND visible_at <= ? AND complete_by > ? AND (suspect = 0 OR id IN "
                f"(SELECT id FROM requests WHERE agent IN ({marks}) AND suspect = 1 "
                "AND visible_at <= ? AND complete_by > ? ORDER BY id LIMIT ?)) "
                "ORDER BY id LIMIT ?) "
                "RETURNING id, agent, task_id, seq, attempt, lock_epoch, kind, payload, "
                "complete_by, within, retry, suspect",
                (worker, *agents, now, now, *agents, now, now, max(suspects, 0), limit),
            ).fetchall()
            rows.sort(key=lambda r: r[0])
            out.append([request_from_row(r, unix_instant) for r in rows])
        return out

    async def reply_and_ack(
        self, request: Request, *, worker: str, ok: bool, body: JsonValue
    ) -> bool:
        return await self._write("reply", (request, worker, ok, body))  # type: ignore[no-any-return]

    def _b_reply(
        self,
        conn: sqlite3.Connection,
        items: list[tuple[Request, str, bool, JsonValue]],
        now: float,
        rings: set[str],
    ) -> list[object]:
        out: list[object] = []
        replies = []
        live: set[tuple[int, str]] = set()
        for chunk in _chunks([item[0].id for item in items], 500):
            marks = ",".join("?" * len(chunk))
            live.update(
                conn.execute(
                    f"SELECT id, taken_by FROM requests WHERE id IN ({marks}) AND complete_by > ?",
                    (*chunk, now),
                ).fetchall()
            )
        acked = []
        for request, worker, ok, body in items:
            if (request.id, worker) not in live:
                out.append(False)
                continue
            try:
                encoded = dumps(body, limit=self.payload_limit)
            except Exception as exc:
                # An unencodable result is the handler's permanent failure.
                ok, encoded = False, json.dumps({"type": "PayloadError", "message": str(exc)})
            acked.append((request.id,))
            replies.append(
                (
                    request.task_id,
                    request.seq,
                    request.attempt,
                    request.lock_epoch,
                    int(ok),
                    encoded,
                    now,
                )
            )
            out.append(True)
        conn.executemany("DELETE FROM requests WHERE id = ?", acked)
        if replies:
            conn.executemany(
                "INSERT INTO replies (task_id, seq, attempt, lock_epoch, ok, body, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                replies,
            )
            rings.add(ch.REPLIES)
        return out

    async def note(self, task_id: str, kind: str, detail: JsonValue) -> None:
        await self._write("note", (task_id, kind, detail))

    def _b_note(
        self,
        conn: sqlite3.Connection,
        items: list[tuple[str, str, JsonValue]],
        now: float,
        rings: set[str],
    ) -> list[object]:
        owners = _owners(conn, [item[0] for item in items])
        self._events(
            conn,
            [
                (task_id, *owners.meta[task_id], kind, json.dumps(detail), now)
                for task_id, kind, detail in items
                if task_id in owners.meta
            ],
            rings,
        )
        return [None] * len(items)

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
        def run(conn: sqlite3.Connection, now: float) -> Breaker | None:
            row = conn.execute(
                f"SELECT {BREAKER_COLUMNS} FROM breakers WHERE service = ?", (service,)
            ).fetchone()
            return None if row is None else breaker_from_row(row, service, unix_instant)

        return await self._read(run)  # type: ignore[no-any-return]

    async def list_breakers(self) -> list[Breaker]:
        def run(conn: sqlite3.Connection, now: float) -> list[Breaker]:
            rows = conn.execute(f"SELECT {BREAKER_COLUMNS} FROM breakers ORDER BY service")
            return [breaker_from_row(r, r[0], unix_instant) for r in rows.fetchall()]

        return await self._read(run)  # type: ignore[no-any-return]

    async def breaker_events(
        self, *, service: str | None = None, limit: int = 50
    ) -> list[BreakerEvent]:
        def run(conn: sqlite3.Connection, now: float) -> list[BreakerEvent]:
            where, params = ("", ()) if service is None else ("WHERE service = ? ", (service,))
            rows = conn.execute(
                f"SELECT {BREAKER_EVENT_COLUMNS} FROM breaker_events {where}"
                "ORDER BY id DESC LIMIT ?",
                (*params, limit),
            ).fetchall()
            return [breaker_event_from_row(r, unix_instant) for r in rows]

        return await self._read(run)  # type: ignore[no-any-return]

    # -- supervisor --------------------------------------------------------
    async def acquire_lease(self, name: str, *, holder: str, ttl: float) -> Lease | None:
        return await self._write("lease", (name, holder, ttl))  # type: ignore[no-any-return]

    def _b_lease(
        self,
        conn: sqlite3.Connection,
        items: list[tuple[str, str, float]],
        now: float,
        rings: set[str],
    ) -> list[object]:
        out: list[object] = []
        for name, holder, ttl in items:
            row = conn.execute(
                "INSERT INTO leases (name, holder, epoch, expires_at) VALUES (?, ?, 1, ?) "
                "ON CONFLICT (name) DO UPDATE SET "
                "epoch = CASE WHEN leases.holder = excluded.holder THEN leases.epoch "
                "ELSE leases.epoch + 1 END, holder = excluded.holder, "
                "expires_at = excluded.expires_at "
                "WHERE leases.holder = excluded.holder OR leases.expires_at <= ? "
                "RETURNING name, holder, epoch, expires_at",
                (name, holder, now + ttl, now),
            ).fetchone()
            out.append(
                None
                if row is None
                else Lease(
                    name=row[0],
                    holder=row[1],
                    epoch=row[2],
                    expires_at=datetime.fromtimestamp(row[3], UTC),
                )
            )
        return out

    async def release_lease(self, name: str, *, holder: str) -> None:
        await self._write("release_lease", (name, holder))

    def _b_release_lease(
        self,
        conn: sqlite3.Connection,
        items: list[tuple[str, str]],
        now: float,
        rings: set[str],
    ) -> list[object]:
        for name, holder in items:
            conn.execute(
                "UPDATE leases SET expires_at = ? WHERE name = ? AND holder = ?",
                (now, name, holder),
            )
        return [None] * len(items)

    async def expired_claims(self, *, limit: int) -> list[Task]:
        def run(conn: sqlite3.Connection, now: float) -> list[Task]:
            rows = conn.execute(
                f"SELECT {_TASK_COLUMNS} FROM tasks WHERE locked_by IS NOT NULL "
                "AND complete_by < ? ORDER BY complete_by LIMIT ?",
                (now, limit),
            ).fetchall()
            return [_task(r) for r in rows]

        return await self._read(run)  # type: ignore[no-any-return]

    async def apply_supervision(self, task: Task, decision: Decision, *, leader: Lease) -> bool:
        return await self._write("supervise", (task, decision, leader))  # type: ignore[no-any-return]

    def _b_supervise(
        self,
        conn: sqlite3.Connection,
        items: list[tuple[Task, Decision, Lease]],
        now: float,
        rings: set[str],
    ) -> list[object]:
        from shepherd.core.supervision import Compensate, Escalate, Reset

        out: list[object] = []
        events = []
        for task, decision, leader in items:
            if not sqlite_crashes.leads(conn, leader, now):
                out.append(False)  # no longer the leader: fenced off
                continue
            fence = (task.id, task.lock_epoch)
            if isinstance(decision, Reset):
                cursor = conn.execute(
                    "UPDATE tasks SET locked_by = NULL, lock_epoch = lock_epoch + 1, "
                    "complete_by = NULL, process_state = ?, failure_count = ?, not_before = ?, "
                    "updated_at = ? WHERE id = ? AND lock_epoch = ? AND locked_by IS NOT NULL",
                    (
                        str(decision.process_state),
                        decision.failure_count,
                        _ts(decision.not_before),
                        now,
                        *fence,
                    ),
                )
                kind, detail = (
                    "reset",
                    {"reason": decision.reason, "failure_count": decision.failure_count},
                )
            elif isinstance(decision, Escalate):
                cursor = conn.execute(
                    "UPDATE tasks SET locked_by = NULL, lock_epoch = lock_epoch + 1, "
                    "complete_by = NULL, process_state = 'error', failure_count = ?, error = ?, "
                    "updated_at = ? WHERE id = ? AND lock_epoch = ? AND locked_by IS NOT NULL",
                    (decision.failure_count, json.dumps({"reason": decision.reason}), now, *fence),
                )
                kind, detail = (
                    "error",
                    {"error": {"reason": decision.reason}, "failure_count": decision.failure_count},
                )
                rings.add(ch.task_channel(task.id))
            elif isinstance(decision, Compensate):
                cursor = conn.execute(
                    "UPDATE tasks SET locked_by = NULL, lock_epoch = lock_epoch + 1, "
                    "complete_by = NULL, process_state = 'compensating', failure_count = ?, "
                    "error = ?, not_before = ?, updated_at = ? "
                    "WHERE id = ? AND lock_epoch = ? AND locked_by IS NOT NULL",
                    (
                        decision.failure_count,
                        json.dumps({"reason": decision.reason}),
                        now,
                        now,
                        *fence,
                    ),
                )
                kind, detail = "compensating", {"error": {"reason": decision.reason}}
            else:  # pragma: no cover - the Decision union is closed
                raise TypeError(f"unknown decision {decision!r}")
            if cursor.rowcount == 0:
                out.append(False)
                continue
            conn.execute("DELETE FROM requests WHERE task_id = ?", (task.id,))
            events.append((task.id, task.key, task.reply_to, kind, json.dumps(detail), now))
            rings.add(ch.TASKS)
            out.append(True)
        self._events(conn, events, rings)
        return out

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
        return await self._read(lambda conn, now: sqlite_workers.list_workers(conn, since))  # type: ignore[no-any-return]

    async def dead_workers(self, instances: Sequence[str], *, ttl: float) -> set[str]:
        if not instances:
            return set()
        return await self._read(  # type: ignore[no-any-return]
            lambda conn, now: sqlite_workers.dead_workers(conn, now, instances, ttl)
        )

    # -- supervisor: crash attribution --------------------------------------
    async def unreaped_workers(self) -> list[Worker]:
        return await self._read(lambda conn, now: sqlite_crashes.unreaped_workers(conn))  # type: ignore[no-any-return]

    async def crash_victims(
        self, instance: str, *, beat_at: datetime
    ) -> list[tuple[Task, bool, int | None]]:
        stamp = beat_at.timestamp()
        return await self._read(  # type: ignore[no-any-return]
            lambda conn, now: sqlite_crashes.crash_victims(conn, _TASK_COLUMNS, instance, stamp)
        )

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
        return await self._read(lambda conn, now: sqlite_retention.get_tombstone(conn, task_id))  # type: ignore[no-any-return]

    async def checkpoint(self) -> None:
        conn = self._conn
        if conn is not None:  # between batches: the connection's thread runs one thing at a time
            await self._call(lambda: sqlite_retention.checkpoint(conn, self.busy_timeout))

    # -- operator ----------------------------------------------------------
    async def retry_task(
        self, task_id: str, *, seq: int | None = None, payload: JsonValue = None
    ) -> Task:
        return await self._write("retry", (task_id, seq, payload))  # type: ignore[no-any-return]

    def _b_retry(
        self,
        conn: sqlite3.Connection,
        items: list[tuple[str, int | None, JsonValue]],
        now: float,
        rings: set[str],
    ) -> list[object]:
        out: list[object] = []
        for task_id, seq, payload in items:
            row = conn.execute(
                f"SELECT {_TASK_COLUMNS} FROM tasks WHERE id = ?", (task_id,)
            ).fetchone()
            if row is None:
                out.append(UnknownTaskError(task_id))
                continue
            if row[6] != "error":
                out.append(InvalidStateError(task_id, row[6], "retry"))
                continue
            override = None if payload is None else dumps(payload, limit=self.payload_limit)
            if seq is not None:
                found = conn.execute(
                    "SELECT state FROM steps WHERE task_id = ? AND seq = ?", (task_id, seq)
                ).fetchone()
                if found is None or found[0] == "completed":
                    out.append(
                        InvalidStateError(
                            task_id,
                            f"step {seq} {'missing' if found is None else 'completed'}",
                            "resubmit step of",
                        )
                    )
                    continue
                conn.execute(
                    "UPDATE steps SET state = 'not_started', error = NULL, "
                    "payload_override = coalesce(?, payload_override) WHERE task_id = ? AND seq = ?",
                    (override, task_id, seq),
                )
                # The operator checked the step's unknown side effects: run them again.
                clear_started(conn, task_id, seq)
            conn.execute(
                "UPDATE steps SET state = 'not_started', error = NULL "
                "WHERE task_id = ? AND state = 'failed'",
                (task_id,),
            )
            in_undo = conn.execute(
                "SELECT 1 FROM steps WHERE task_id = ? AND kind = 'undo' LIMIT 1", (task_id,)
            ).fetchone()
            state = "compensating" if in_undo or row[14] else "pending"
            updated = conn.execute(
                "UPDATE tasks SET process_state = ?, locked_by = NULL, lock_epoch = lock_epoch + 1, "
                "complete_by = NULL, failure_count = 0, not_before = ?, updated_at = ?, "
                f"error = NULL WHERE id = ? RETURNING {_TASK_COLUMNS}",
                (state, now, now, task_id),
            ).fetchone()
            self._events(
                conn,
                [
                    (
                        task_id,
                        row[2],
                        row[13],
                        "retried",
                        json.dumps({"seq": seq, "state": state}),
                        now,
                    )
                ],
                rings,
            )
            rings.add(ch.TASKS)
            out.append(_task(updated))
        return out

    async def cancel_task(self, task_id: str) -> Task:
        return await self._write("cancel", task_id)  # type: ignore[no-any-return]

    def _b_cancel(
        self, conn: sqlite3.Connection, items: list[str], now: float, rings: set[str]
    ) -> list[object]:
        out: list[object] = []
        for task_id in items:
            row = conn.execute(
                "SELECT process_state, key, reply_to FROM tasks WHERE id = ?", (task_id,)
            ).fetchone()
            if row is None:
                out.append(UnknownTaskError(task_id))
                continue
            if row[0] in ("processed", "compensated", "cancelled"):
                out.append(InvalidStateError(task_id, row[0], "cancel"))
                continue
            updated = conn.execute(
                "UPDATE tasks SET process_state = 'compensating', cancel_requested = 1, "
                "locked_by = NULL, lock_epoch = lock_epoch + 1, complete_by = NULL, "
                "failure_count = 0, not_before = ?, updated_at = ? "
                f"WHERE id = ? RETURNING {_TASK_COLUMNS}",
                (now, now, task_id),
            ).fetchone()
            conn.execute("DELETE FROM requests WHERE task_id = ?", (task_id,))
            self._events(conn, [(task_id, row[1], row[2], "cancel_requested", "{}", now)], rings)
            rings.add(ch.TASKS)
            out.append(_task(updated))
        return out


def _event(row: tuple[Any, ...]) -> Event:
    return event_from_row(row, unix_instant)


class _Owners(dict[str, tuple[int, str | None]]):
    """task id -> (lock_epoch, locked_by), plus (key, reply_to) in `meta`."""

    def __init__(self) -> None:
        super().__init__()
        self.meta: dict[str, tuple[str | None, str | None]] = {}


def _owners(conn: sqlite3.Connection, task_ids: list[str]) -> _Owners:
    """Read the fencing columns of many tasks in few statements (inside the write lock)."""
    found = _Owners()
    for chunk in _chunks(list(dict.fromkeys(task_ids)), 500):
        marks = ",".join("?" * len(chunk))
        for row in conn.execute(
            f"SELECT id, lock_epoch, locked_by, key, reply_to FROM tasks WHERE id IN ({marks})",
            chunk,
        ):
            found[row[0]] = (row[1], row[2])
            found.meta[row[0]] = (row[3], row[4])
    return found


def _chunks(items: list[Any], size: int) -> list[list[Any]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def _rollback(conn: sqlite3.Connection) -> None:
    """End a failed transaction without hiding why it failed.

    SQLite rolls some transactions back by itself (a full disk, an I/O error);
    a ROLLBACK then fails with "no transaction is active". Nor may a ROLLBACK
    that fails for its own reason replace the error that is being raised.
    """
    if not conn.in_transaction:
        return
    try:
        conn.execute("ROLLBACK")
    except sqlite3.Error as exc:
        log.warning("SQLite store: ROLLBACK after a failed transaction failed too: %s", exc)


def _split_sql(sql: str) -> list[str]:
    lines = [line for line in sql.splitlines() if not line.strip().startswith("--")]
    return [part.strip() for part in "\n".join(lines).split(";") if part.strip()]
