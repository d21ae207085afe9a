"""Batch handlers for heartbeats (`extend_step`) and done keys (`begin_once` and co.).

A heartbeat checks, under the write lock, that its request is still the
current execution of a running step of a task at its epoch, then moves the
request's, the step's and the task's deadlines ahead together. A done key is
one row: inserted `started` before the effect, updated `done` with its result.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.store.contract import REPLY_GRACE
from shepherd.store.ops import AbandonOnce, BeginOnce, ExtendStep, FinishOnce
from shepherd.store.rows import load, unix_instant
from shepherd.store.sqlite.batch import WRITES

if TYPE_CHECKING:
    from datetime import datetime

    from shepherd.core.records import JsonValue, Request
    from shepherd.store.sqlite.batch import SqliteBatch

__all__ = ["abandon_once", "begin_once", "clear_started", "extend_step", "finish_once"]

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


@WRITES.handles(ExtendStep)
def extend_step(batch: SqliteBatch, ops: Sequence[ExtendStep]) -> list[object]:
    """Heartbeats: move the deadlines of current executions one window ahead."""
    return [_extend(batch, op.request, op.worker) for op in ops]


def _extend(batch: SqliteBatch, request: Request, worker: str) -> datetime | None:
    """The execution's new complete_by; None if it has no window or is no longer current."""
    conn, now = batch.conn, batch.now
    if request.within is None:
        return None
    attempt, epoch = request.attempt, request.lock_epoch
    current = (request.id, worker, now, attempt, epoch, epoch, attempt)
    if conn.execute(_CURRENT, current).fetchone() is None:
        return None
    complete_by = now + request.within
    conn.execute(_EXTEND_REQUEST, (complete_by, complete_by, request.id))
    conn.execute(_EXTEND_STEP, (complete_by, request.task_id, request.seq))
    conn.execute(_EXTEND_TASK, (complete_by + REPLY_GRACE, now, request.task_id))
    return unix_instant(complete_by)


@WRITES.handles(BeginOnce)
def begin_once(batch: SqliteBatch, ops: Sequence[BeginOnce]) -> list[object]:
    """Mark keys started, or say how an earlier execution left them."""
    return [_begin(batch, op.key, op.holder) for op in ops]


def _begin(batch: SqliteBatch, key: str, holder: str) -> tuple[str, JsonValue]:
    if batch.conn.execute(_MARK, (key, holder, batch.now)).rowcount == 1:
        return "new", None
    state, result = batch.conn.execute(_READ_MARK, (key,)).fetchone()
    return ("done", load(result)) if state == "done" else ("started", None)


@WRITES.handles(FinishOnce)
def finish_once(batch: SqliteBatch, ops: Sequence[FinishOnce]) -> list[object]:
    """Record effects' results on their holders' started marks."""
    out: list[object] = []
    for op in ops:
        result = batch.encode(op.result)
        if isinstance(result, Exception):
            out.append(result)
            continue
        finished = batch.conn.execute(_FINISH, (result, batch.now, op.key, op.holder))
        out.append(finished.rowcount == 1)
    return out


@WRITES.handles(AbandonOnce)
def abandon_once(batch: SqliteBatch, ops: Sequence[AbandonOnce]) -> list[object]:
    """Delete holders' started marks (their effects did not happen)."""
    return [*batch.changed(_ABANDON, [(op.key, op.holder) for op in ops])]


def clear_started(conn: sqlite3.Connection, task_id: str, seq: int) -> None:
    """Delete the started (never the done) marks of step `seq` of a task."""
    key = f"{task_id}/{seq}"
    conn.execute(CLEAR_STARTED, (key, len(key) + 1, key + "/"))
