"""SQLite batch handlers and reads for retention: purges, tombstones, WAL checkpoints.

Each handler runs inside the store's group-commit transaction:
`handler(store, conn, items, now, rings)` returns one outcome per item. The
transaction holds the database's write lock (BEGIN IMMEDIATE), so the ended
tasks a purge selects cannot change before it deletes them.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from shepherd.core.retention import Tombstone
from shepherd.core.states import ProcessState
from shepherd.store.rows import unix_instant

if TYPE_CHECKING:
    from shepherd.store.sqlite import SQLiteStore

__all__ = ["HANDLERS", "checkpoint", "get_tombstone", "purged_key"]

Handler = Callable[["SQLiteStore", sqlite3.Connection, list[Any], float, set[str]], list[object]]

log = logging.getLogger("shepherd.store.sqlite")

# The predicate repeats the partial index's (tasks_ended) word for word, as SQLite
# needs to use it; without statistics it would rather take tasks_state and sort
# every ended task, hence INDEXED BY.
_ENDED = (
    "SELECT id, workflow, key, process_state, updated_at FROM tasks INDEXED BY tasks_ended "
    "WHERE process_state IN ('processed', 'compensated', 'cancelled') AND updated_at < ? "
    "ORDER BY updated_at LIMIT ?"
)
_BY_TASK = ("steps", "events", "requests", "replies")
# A task's done keys are `task_id/seq` and `task_id/seq/name`: the keys from
# `task_id/` up to `task_id0` ('0' follows '/'), a range of the primary key.
_DONE_KEYS = "DELETE FROM done_keys WHERE key >= ? AND key < ?"
_TOMBSTONE = (
    "INSERT INTO tombstones (task_id, workflow, key, process_state, ended_at, purged_at) "
    "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (workflow, key) DO UPDATE SET "
    "task_id = excluded.task_id, process_state = excluded.process_state, "
    "ended_at = excluded.ended_at, purged_at = excluded.purged_at"
)
_OLD_TOMBSTONES = (
    "DELETE FROM tombstones WHERE task_id IN "
    "(SELECT task_id FROM tombstones WHERE purged_at < ? ORDER BY purged_at LIMIT ?)"
)
_GET_TOMBSTONE = (
    "SELECT task_id, workflow, key, process_state, ended_at, purged_at FROM tombstones "
    "WHERE task_id = ?"
)
_PURGED_KEY = "SELECT task_id FROM tombstones WHERE workflow = ? AND key = ?"
_CHUNK = 500


def purge_tasks(
    store: SQLiteStore,
    conn: sqlite3.Connection,
    items: list[tuple[float, int]],
    now: float,
    rings: set[str],
) -> list[object]:
    """Delete ended tasks older than each item's instant, with all their rows."""
    out: list[object] = []
    for ended_before, limit in items:
        rows = conn.execute(_ENDED, (ended_before, limit)).fetchall()
        ids = [row[0] for row in rows]
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            for table in _BY_TASK:
                conn.execute(f"DELETE FROM {table} WHERE task_id IN ({marks})", chunk)
            conn.execute(f"DELETE FROM tasks WHERE id IN ({marks})", chunk)
        conn.executemany(_DONE_KEYS, [(task_id + "/", task_id + "0") for task_id in ids])
        conn.executemany(
            _TOMBSTONE,
            [(r[0], r[1], r[2], r[3], r[4], now) for r in rows if r[2] is not None],
        )
        out.append(len(ids))
    return out


def purge_tombstones(
    store: SQLiteStore,
    conn: sqlite3.Connection,
    items: list[tuple[float, int]],
    now: float,
    rings: set[str],
) -> list[object]:
    """Delete tombstones written before each item's instant, oldest first."""
    return [conn.execute(_OLD_TOMBSTONES, item).rowcount for item in items]


def purged_key(conn: sqlite3.Connection, workflow: str, key: str) -> str | None:
    """The id of the purged task whose tombstone holds (workflow, key), if any."""
    row = conn.execute(_PURGED_KEY, (workflow, key)).fetchone()
    return None if row is None else str(row[0])


def get_tombstone(conn: sqlite3.Connection, task_id: str) -> Tombstone | None:
    """The tombstone of a purged task, or None."""
    row = conn.execute(_GET_TOMBSTONE, (task_id,)).fetchone()
    if row is None:
        return None
    return Tombstone(
        task_id=row[0],
        workflow=row[1],
        key=row[2],
        process_state=ProcessState(row[3]),
        ended_at=unix_instant(row[4]),
        purged_at=unix_instant(row[5]),
    )


def checkpoint(conn: sqlite3.Connection, busy_timeout: float) -> None:
    """Copy the WAL into the database file and truncate it, waiting for no one.

    Without a busy handler, a TRUNCATE checkpoint that meets a reader or a
    writer of another process copies what it can (as a PASSIVE one does) and
    returns at once; the WAL is then truncated by a later pass, or down to
    `journal_size_limit` when a writer starts it over. The connection's busy
    timeout is put back afterwards.
    """
    try:
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
    except sqlite3.Error as exc:
        log.debug("SQLite store: checkpoint skipped: %s", exc)
        return
    if busy:
        log.debug("SQLite store: checkpoint copied %d of %d frames (in use)", copied, frames)


#: Operation kind -> its batch handler.
HANDLERS: dict[str, Handler] = {
    "purge_tasks": purge_tasks,
    "purge_tombstones": purge_tombstones,
}
