"""SQLite batch handlers and reads: the worker registry.

Each handler runs inside the store's group-commit transaction:
`handler(store, conn, items, now, rings)` returns one outcome per item. `now` is
the store's clock (unix seconds), as for every other row this store writes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from shepherd.store.contract import WORKER_RETENTION
from shepherd.store.rows import unix_instant
from shepherd.store.worker_rows import WORKER_COLUMNS, names, worker_from_row

if TYPE_CHECKING:
    from shepherd.core.workers import Worker
    from shepherd.store.sqlite import SQLiteStore

Handler = Callable[["SQLiteStore", sqlite3.Connection, list[Any], float, set[str]], list[object]]

_REGISTER = (
    "INSERT INTO workers (instance, host, pid, roles, agents, started_at, beat_at, stopped_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, NULL) ON CONFLICT (instance) DO UPDATE SET "
    "host = excluded.host, pid = excluded.pid, roles = excluded.roles, "
    "agents = excluded.agents, started_at = excluded.started_at, beat_at = excluded.beat_at, "
    f"stopped_at = NULL, died_at = NULL, reaped_at = NULL RETURNING {WORKER_COLUMNS}"
)
_FORGET = "DELETE FROM workers WHERE coalesce(stopped_at, beat_at) < ?"
_BEAT = "UPDATE workers SET beat_at = ?, died_at = NULL, reaped_at = NULL WHERE instance = ? AND stopped_at IS NULL"
_STOP = "UPDATE workers SET stopped_at = ? WHERE instance = ? AND stopped_at IS NULL"
_LIST = f"SELECT {WORKER_COLUMNS} FROM workers ORDER BY started_at DESC, instance"
_LIST_SINCE = (
    f"SELECT {WORKER_COLUMNS} FROM workers WHERE coalesce(stopped_at, beat_at) >= ? "
    "ORDER BY started_at DESC, instance"
)
_CHUNK = 500


def register_worker(
    store: SQLiteStore,
    conn: sqlite3.Connection,
    items: list[tuple[str, str, int, tuple[str, ...], tuple[str, ...]]],
    now: float,
    rings: set[str],
) -> list[object]:
    """Write each process's row afresh; forget rows silent for longer than the retention."""
    conn.execute(_FORGET, (now - WORKER_RETENTION,))
    out: list[object] = []
    for instance, host, pid, roles, agents in items:
        row = conn.execute(
            _REGISTER, (instance, host, pid, names(roles), names(agents), now, now)
        ).fetchone()
        out.append(worker_from_row(row, unix_instant))
    return out


def beat_worker(
    store: SQLiteStore, conn: sqlite3.Connection, items: list[str], now: float, rings: set[str]
) -> list[object]:
    """Heartbeats: True for each row beaten, False where it is gone or stopped."""
    return [conn.execute(_BEAT, (now, instance)).rowcount == 1 for instance in items]


def stop_worker(
    store: SQLiteStore, conn: sqlite3.Connection, items: list[str], now: float, rings: set[str]
) -> list[object]:
    """Mark rows stopped (graceful stops)."""
    for instance in items:
        conn.execute(_STOP, (now, instance))
    return [None] * len(items)


def list_workers(conn: sqlite3.Connection, since: datetime | None) -> list[Worker]:
    """Workers last heard from at or after `since` (all when None), newest started first."""
    if since is None:
        rows = conn.execute(_LIST).fetchall()
    else:
        rows = conn.execute(_LIST_SINCE, (since.timestamp(),)).fetchall()
    return [worker_from_row(row, unix_instant) for row in rows]


def dead_workers(
    conn: sqlite3.Connection, now: float, instances: Sequence[str], ttl: float
) -> set[str]:
    """The instances that are stopped, unknown, or silent for `ttl` seconds or more."""
    wanted = list(dict.fromkeys(instances))
    alive: set[str] = set()
    for start in range(0, len(wanted), _CHUNK):
        chunk = wanted[start : start + _CHUNK]
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(
            f"SELECT instance FROM workers WHERE instance IN ({marks}) "
            "AND stopped_at IS NULL AND died_at IS NULL AND beat_at > ?",
            (*chunk, now - ttl),
        )
        alive.update(row[0] for row in rows)
    return set(wanted) - alive


#: Operation kind -> its batch handler.
HANDLERS: dict[str, Handler] = {
    "register_worker": register_worker,
    "beat_worker": beat_worker,
    "stop_worker": stop_worker,
}
