"""SQLite batch handlers: heartbeats and done keys.

Each handler runs inside the store's group-commit transaction:
`handler(store, conn, items, now, rings)` returns one outcome per item (a value,
or an exception that only that item's caller sees). The transaction began with
BEGIN IMMEDIATE, so it holds the database's write lock: the fencing checks and
the writes that follow them see the same rows.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from shepherd.payloads import dumps
from shepherd.store.contract import REPLY_GRACE
from shepherd.store.rows import load, unix_instant

if TYPE_CHECKING:
    from shepherd.core.records import JsonValue, Request
    from shepherd.store.sqlite import SQLiteStore

Handler = Callable[["SQLiteStore", sqlite3.Connection, list[Any], float, set[str]], list[object]]

# The current execution of a running step: its request taken by this worker and
# unexpired, the step running at the request's attempt, the task at its epoch.
_CURRENT = (
    "SELECT 1 FROM requests r JOIN tasks t ON t.id = r.task_id "
    "JOIN steps s ON s.task_id = r.task_id AND s.seq = r.seq "
    "WHERE r.id = ? AND r.taken_by = ? AND r.complete_by > ? AND r.attempt = ? "
    "AND r.lock_epoch = ? AND t.lock_epoch = ? AND t.locked_by IS NOT NULL "
    "AND s.state = 'running' AND s.attempt = ?"
)
_EXTEND_REQUEST = "UPDATE requests SET complete_by = ?, visible_at = ? WHERE id = ?"
_EXTEND_STEP = "UPDATE steps SET complete_by = ? WHERE task_id = ? AND seq = ?"
_EXTEND_TASK = "UPDATE tasks SET complete_by = max(complete_by, ?), updated_at = ? WHERE id = ?"

_MARK = (
    "INSERT INTO done_keys (key, state, holder, created_at) VALUES (?, 'started', ?, ?) "
    "ON CONFLICT (key) DO NOTHING"
)
_READ_MARK = "SELECT state, result FROM done_keys WHERE key = ?"
_FINISH = (
    "UPDATE done_keys SET state = 'done', result = ?, done_at = ? "
    "WHERE key = ? AND holder = ? AND state = 'started'"
)
_ABANDON = "DELETE FROM done_keys WHERE key = ? AND holder = ? AND state = 'started'"
#: The started marks of one step: its key `task_id/seq`, and `task_id/seq/name`.
CLEAR_STARTED = (
    "DELETE FROM done_keys WHERE state = 'started' AND (key = ? OR substr(key, 1, ?) = ?)"
)


def extend_step(
    store: SQLiteStore,
    conn: sqlite3.Connection,
    items: list[tuple[Request, str]],
    now: float,
    rings: set[str],
) -> list[object]:
    """Heartbeats: move the deadlines of current executions one window ahead."""
    out: list[object] = []
    for request, worker in items:
        if request.within is None:
            out.append(None)
            continue
        current = conn.execute(
            _CURRENT,
            (
                request.id,
                worker,
                now,
                request.attempt,
                request.lock_epoch,
                request.lock_epoch,
                request.attempt,
            ),
        ).fetchone()
        if current is None:
            out.append(None)
            continue
        complete_by = now + request.within
        conn.execute(_EXTEND_REQUEST, (complete_by, complete_by, request.id))
        conn.execute(_EXTEND_STEP, (complete_by, request.task_id, request.seq))
        conn.execute(_EXTEND_TASK, (complete_by + REPLY_GRACE, now, request.task_id))
        out.append(unix_instant(complete_by))
    return out


def begin_once(
    store: SQLiteStore,
    conn: sqlite3.Connection,
    items: list[tuple[str, str]],
    now: float,
    rings: set[str],
) -> list[object]:
    """Mark keys started, or say how an earlier execution left them."""
    out: list[object] = []
    for key, holder in items:
        if conn.execute(_MARK, (key, holder, now)).rowcount == 1:
            out.append(("new", None))
            continue
        state, result = conn.execute(_READ_MARK, (key,)).fetchone()
        out.append(("done", load(result)) if state == "done" else ("started", None))
    return out


def finish_once(
    store: SQLiteStore,
    conn: sqlite3.Connection,
    items: list[tuple[str, str, JsonValue]],
    now: float,
    rings: set[str],
) -> list[object]:
    """Record effects' results on their holders' started marks."""
    out: list[object] = []
    for key, holder, result in items:
        try:
            encoded = dumps(result, limit=store.payload_limit)
        except Exception as exc:
            out.append(exc)
            continue
        out.append(conn.execute(_FINISH, (encoded, now, key, holder)).rowcount == 1)
    return out


def abandon_once(
    store: SQLiteStore,
    conn: sqlite3.Connection,
    items: list[tuple[str, str]],
    now: float,
    rings: set[str],
) -> list[object]:
    """Delete holders' started marks (their effects did not happen)."""
    return [conn.execute(_ABANDON, (key, holder)).rowcount == 1 for key, holder in items]


def clear_started(conn: sqlite3.Connection, task_id: str, seq: int) -> None:
    """Delete the started (never the done) marks of step `seq` of a task."""
    key = f"{task_id}/{seq}"
    conn.execute(CLEAR_STARTED, (key, len(key) + 1, key + "/"))


#: Operation kind -> its batch handler.
HANDLERS: dict[str, Handler] = {
    "extend_step": extend_step,
    "begin_once": begin_once,
    "finish_once": finish_once,
    "abandon_once": abandon_once,
}
