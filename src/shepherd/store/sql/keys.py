"""Heartbeats (`extend_step`) and done keys (`begin_once` and co.), for both backends.

A heartbeat first holds its task, fenced by `lock_epoch` (PostgreSQL locks the
row `FOR UPDATE`, as every other writer of a task does; SQLite holds the write
lock), so that a supervisor's reset or a reply being recorded cannot slip
between the fencing checks and the writes; then it checks that its request is
still the current execution of a running step, and moves the request's, the
step's and the task's deadlines ahead together. A done key is one row:
inserted `started` before the effect, updated `done` with its result.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.store.contract import REPLY_GRACE
from shepherd.store.rows import load
from shepherd.store.sql.plan import Query, first, send

if TYPE_CHECKING:
    from datetime import datetime

    from shepherd.core.records import JsonValue, Request
    from shepherd.store.ops import AbandonOnce, BeginOnce, ExtendStep, FinishOnce
    from shepherd.store.sql.dialect import Dialect
    from shepherd.store.sql.plan import Plan, Writing

__all__ = ["abandon_once", "begin_once", "clear_started", "extend_step", "finish_once"]

_LOCK_TASK = (
    "SELECT 1 FROM tasks WHERE id = ? AND lock_epoch = ? AND locked_by IS NOT NULL{for_update}"
)
# The current execution of a running step: its request taken by this worker and
# unexpired, the step running at the request's attempt (the task is held).
# coalesce(): see UNINDEXED_OWNER in postgres/rows.py.
_EXTEND_REQUEST = (
    "UPDATE requests AS r SET complete_by = ?, visible_at = ? "
    "WHERE r.id = ? AND coalesce(r.taken_by, '') = ? AND r.complete_by > ? AND r.attempt = ? "
    "AND r.lock_epoch = ? AND EXISTS (SELECT 1 FROM steps s WHERE s.task_id = r.task_id "
    "AND s.seq = r.seq AND s.state = 'running' AND s.attempt = r.attempt) RETURNING id"
)
_EXTEND_STEP = "UPDATE steps SET complete_by = ? WHERE task_id = ? AND seq = ?"
_EXTEND_TASK = "UPDATE tasks SET complete_by = {greatest}(complete_by, ?) WHERE id = ?"
_MARK = (
    "INSERT INTO done_keys (key, state, holder, created_at) VALUES (?, 'started', ?, ?) "
    "ON CONFLICT (key) DO NOTHING RETURNING key"
)
_READ_MARK = "SELECT state, result FROM done_keys WHERE key = ?"
_FINISH = (
    "UPDATE done_keys SET state = 'done', result = ?, done_at = ? "
    "WHERE key = ? AND holder = ? AND state = 'started' RETURNING key"
)
_ABANDON = "DELETE FROM done_keys WHERE key = ? AND holder = ? AND state = 'started' RETURNING key"
# The started marks of one step: its key `task_id/seq`, and `task_id/seq/name`.
_CLEAR_STARTED = {
    # (key, len(key) + 1, key + "/")
    "sqlite": "DELETE FROM done_keys WHERE state = 'started' "
    "AND (key = ? OR substr(key, 1, ?) = ?)",
    # (key, key + "/")
    "postgres": "DELETE FROM done_keys WHERE state = 'started' "
    "AND (key = ? OR starts_with(key, ?))",
}


def extend_step(batch: Writing, ops: Sequence[ExtendStep]) -> Plan[list[object]]:
    """Heartbeats: move the deadlines of current executions one window ahead."""
    out: list[object] = []
    for op in ops:
        extended = yield from _extend(batch, op.request, op.worker)
        out.append(extended)
    return out


def _extend(batch: Writing, request: Request, worker: str) -> Plan[datetime | None]:
    """The execution's new complete_by; None if it has no window or is no longer current."""
    if request.within is None:
        return None
    d = batch.dialect
    if (yield from first(d.sql(_LOCK_TASK), (request.task_id, request.lock_epoch))) is None:
        return None
    now = batch.now
    complete_by = d.later(now, request.within)
    current = (request.id, worker, now, request.attempt, request.lock_epoch)
    if (yield from first(d.sql(_EXTEND_REQUEST), (complete_by, complete_by, *current))) is None:
        return None
    yield [
        Query(d.sql(_EXTEND_STEP), (complete_by, request.task_id, request.seq), rows=False),
        Query(
            d.sql(_EXTEND_TASK),
            (d.later(complete_by, REPLY_GRACE), request.task_id),
            rows=False,
        ),
    ]
    return d.instant(complete_by)


def begin_once(batch: Writing, ops: Sequence[BeginOnce]) -> Plan[list[object]]:
    """Mark keys started, or say how an earlier execution left them."""
    out: list[object] = []
    for op in ops:
        begun = yield from _begin(batch, op.key, op.holder)
        out.append(begun)
    return out


def _begin(batch: Writing, key: str, holder: str) -> Plan[tuple[str, JsonValue]]:
    d = batch.dialect
    while True:
        if (yield from first(d.sql(_MARK), (key, holder, batch.now))) is not None:
            return "new", None
        row = yield from first(d.sql(_READ_MARK), (key,))
        if row is not None:
            state, result = row
            return ("done", load(result)) if state == "done" else ("started", None)
        # Abandoned (or cleared) since our insert met it, on PostgreSQL: mark it ourselves.


def finish_once(batch: Writing, ops: Sequence[FinishOnce]) -> Plan[list[object]]:
    """Record effects' results on their holders' started marks."""
    sql = batch.dialect.sql(_FINISH)
    results = [batch.encode(op.result) for op in ops]
    finishing = [
        Query(sql, (result, batch.now, op.key, op.holder))
        for op, result in zip(ops, results, strict=True)
        if isinstance(result, str)
    ]
    finished = iter((yield finishing))
    return [bool(next(finished)) if isinstance(result, str) else result for result in results]


def abandon_once(batch: Writing, ops: Sequence[AbandonOnce]) -> Plan[list[object]]:
    """Delete holders' started marks (their effects did not happen)."""
    sql = batch.dialect.sql(_ABANDON)
    return [bool(rows) for rows in (yield [Query(sql, (op.key, op.holder)) for op in ops])]


def clear_started(d: Dialect, task_id: str, seq: int) -> Plan[None]:
    """Delete the started (never the done) marks of step `seq` of a task."""
    key = f"{task_id}/{seq}"
    params = (key, len(key) + 1, key + "/") if d.name == "sqlite" else (key, key + "/")
    yield from send(d.sql(_CLEAR_STARTED[d.name]), params)
