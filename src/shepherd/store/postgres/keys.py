"""Batch handlers for heartbeats (`extend_step`) and done keys (`begin_once` and co.).

A heartbeat locks its task row first (`FOR UPDATE`, fenced by `lock_epoch`),
as every other writer of a task does, so a supervisor's reset or a reply being
recorded cannot slip between the fencing checks and the writes. A done key is
one row: inserted `started` before the effect, updated `done` with its result.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

from shepherd.store.contract import REPLY_GRACE
from shepherd.store.ops import AbandonOnce, BeginOnce, ExtendStep, FinishOnce
from shepherd.store.postgres.batch import WRITES
from shepherd.store.rows import load

if TYPE_CHECKING:
    from datetime import datetime

    from shepherd.core.records import JsonValue, Request
    from shepherd.store.postgres.batch import PostgresBatch

__all__ = ["abandon_once", "begin_once", "clear_started", "extend_step", "finish_once"]

_GRACE = timedelta(seconds=REPLY_GRACE)

_LOCK_TASK = (
    "SELECT 1 FROM tasks WHERE id = %s AND lock_epoch = %s AND locked_by IS NOT NULL FOR UPDATE"
)
# The current execution of a running step: its request taken by this worker and
# unexpired, the step running at the request's attempt (the task is locked).
# coalesce(): see UNINDEXED_OWNER in postgres/rows.py.
_EXTEND_REQUEST = (
    "UPDATE requests r SET complete_by = %s, visible_at = %s "
    "WHERE r.id = %s AND coalesce(r.taken_by, '') = %s AND r.complete_by > %s AND r.attempt = %s "
    "AND r.lock_epoch = %s AND EXISTS (SELECT 1 FROM steps s WHERE s.task_id = r.task_id "
    "AND s.seq = r.seq AND s.state = 'running' AND s.attempt = r.attempt) RETURNING r.id"
)
_EXTEND_STEP = "UPDATE steps SET complete_by = %s WHERE task_id = %s AND seq = %s"
_EXTEND_TASK = (
    "UPDATE tasks SET complete_by = greatest(complete_by, %s), updated_at = %s WHERE id = %s"
)

_MARK = (
    "INSERT INTO done_keys (key, state, holder, created_at) VALUES (%s, 'started', %s, %s) "
    "ON CONFLICT (key) DO NOTHING RETURNING key"
)
_READ_MARK = "SELECT state, result FROM done_keys WHERE key = %s"
_FINISH = (
    "UPDATE done_keys SET state = 'done', result = %s, done_at = %s "
    "WHERE key = %s AND holder = %s AND state = 'started' RETURNING key"
)
_ABANDON = (
    "DELETE FROM done_keys WHERE key = %s AND holder = %s AND state = 'started' RETURNING key"
)
_CLEAR_STARTED = (
    "DELETE FROM done_keys WHERE state = 'started' AND (key = %s OR starts_with(key, %s))"
)


@WRITES.handles(ExtendStep)
async def extend_step(batch: PostgresBatch, ops: Sequence[ExtendStep]) -> list[object]:
    """Heartbeats: move the deadlines of current executions one window ahead."""
    return [await _extend(batch, op.request, op.worker) for op in ops]


async def _extend(batch: PostgresBatch, request: Request, worker: str) -> datetime | None:
    """The execution's new complete_by; None if it has no window or is no longer current."""
    if request.within is None:
        return None
    if await batch.scalar(_LOCK_TASK, (request.task_id, request.lock_epoch)) is None:
        return None
    now = batch.now
    complete_by = now + timedelta(seconds=request.within)
    current = (request.id, worker, now, request.attempt, request.lock_epoch)
    if await batch.scalar(_EXTEND_REQUEST, (complete_by, complete_by, *current)) is None:
        return None
    await batch.send(_EXTEND_STEP, (complete_by, request.task_id, request.seq))
    await batch.send(_EXTEND_TASK, (complete_by + _GRACE, now, request.task_id))
    return complete_by


@WRITES.handles(BeginOnce)
async def begin_once(batch: PostgresBatch, ops: Sequence[BeginOnce]) -> list[object]:
    """Mark keys started, or say how an earlier execution left them."""
    return [await _begin(batch, op.key, op.holder) for op in ops]


async def _begin(batch: PostgresBatch, key: str, holder: str) -> tuple[str, JsonValue]:
    while True:
        if await batch.scalar(_MARK, (key, holder, batch.now)) is not None:
            return "new", None
        row = await (await batch.send(_READ_MARK, (key,))).fetchone()
        if row is not None:
            state, result = row
            return ("done", load(result)) if state == "done" else ("started", None)
        # Abandoned (or cleared) since our insert met it: mark it ourselves.


@WRITES.handles(FinishOnce)
async def finish_once(batch: PostgresBatch, ops: Sequence[FinishOnce]) -> list[object]:
    """Record effects' results on their holders' started marks."""
    results = [batch.encode(op.result) for op in ops]
    finishing = [
        (result, batch.now, op.key, op.holder)
        for op, result in zip(ops, results, strict=True)
        if isinstance(result, str)
    ]
    finished = iter(await batch.found(_FINISH, finishing))
    return [next(finished) if isinstance(result, str) else result for result in results]


@WRITES.handles(AbandonOnce)
async def abandon_once(batch: PostgresBatch, ops: Sequence[AbandonOnce]) -> list[object]:
    """Delete holders' started marks (their effects did not happen)."""
    return [*await batch.found(_ABANDON, [(op.key, op.holder) for op in ops])]


async def clear_started(batch: PostgresBatch, task_id: str, seq: int) -> None:
    """Delete the started (never the done) marks of step `seq` of a task."""
    key = f"{task_id}/{seq}"
    await batch.send(_CLEAR_STARTED, (key, key + "/"))
