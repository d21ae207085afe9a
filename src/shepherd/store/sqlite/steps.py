"""Batch handlers for steps: start a step with its request, record agents' replies.

`start_step` is the transactional outbox: the step turns `running` and its
request is queued in the same transaction, fenced by the owner's epoch (read
under the write lock before anything is written). `record_replies` records
only replies for the task's current epoch and the running step's current
attempt; the others are dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.store import signals as ch
from shepherd.store.ops import OwnerTake, RecordReplies, SleepTask, StartStep
from shepherd.store.rows import unix_instant
from shepherd.store.sql import sleeps
from shepherd.store.sql.dialect import SQLITE
from shepherd.store.sql.owned_steps import HANDED, handed_params
from shepherd.store.sqlite.batch import WRITES
from shepherd.store.sqlite.rows import owners, tuples
from shepherd.store.step_writes import REPLY_COLUMNS, handed_request, plan_starts, sort_replies

if TYPE_CHECKING:
    from shepherd.store.sqlite.batch import SqliteBatch
    from shepherd.store.step_writes import Replies

__all__ = ["record_replies", "start_step", "write_recorded"]

_SUPERSEDE = "DELETE FROM requests WHERE task_id = ? AND seq = ?"
# A touch moves the claim ahead and writes no indexed column (migration 0032):
# updated_at is moved by changes of state and claim, not by a step's progress.
_TOUCH = "UPDATE tasks SET complete_by = ? WHERE id = ?"
_UPSERT_STEP = (
    "INSERT INTO steps (task_id, seq, kind, agent, state, attempt, complete_by, "
    "request, undo, compensates, resolution, started_at) "
    "VALUES (?, ?, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (task_id, seq) DO UPDATE SET state = 'running', "
    "attempt = excluded.attempt, complete_by = excluded.complete_by, "
    "agent = excluded.agent, kind = excluded.kind, request = excluded.request, "
    "undo = excluded.undo, compensates = excluded.compensates, "
    "resolution = excluded.resolution, error = NULL, started_at = excluded.started_at"
)
_ENQUEUE = (
    "INSERT INTO requests (agent, task_id, seq, attempt, lock_epoch, kind, payload, "
    "complete_by, within, retry, suspect, resolution, trace, owner_key, visible_at, "
    "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
# A request taken as it is queued: leased to its worker and hidden until complete_by.
_ENQUEUE_TAKEN = (
    "INSERT INTO requests (agent, task_id, seq, attempt, lock_epoch, kind, payload, "
    "complete_by, within, retry, suspect, resolution, trace, owner_key, taken_by, "
    "visible_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
    "RETURNING id"
)
_HANDED = SQLITE.sql(HANDED)
_PAYLOAD = 6
_COMPLETE_BY = 7
_OWNER_KEY = 13
_REPLIES = (
    f"SELECT {REPLY_COLUMNS} FROM replies r JOIN tasks t ON t.id = r.task_id "
    "LEFT JOIN steps s ON s.task_id = r.task_id AND s.seq = r.seq "
    "WHERE t.locked_by = ? ORDER BY r.id LIMIT ?"
)
# (task_id, seq, body, now): the reply's body becomes the step's result or error.
_RECORD = (
    "UPDATE steps SET state = '{state}', {column} = ?3, finished_at = ?4 "
    "WHERE task_id = ?1 AND seq = ?2"
)
_COMPLETED = _RECORD.format(state="completed", column="result")
_FAILED = _RECORD.format(state="failed", column="error")
_COMPENSATED = "UPDATE steps SET state = 'compensated' WHERE task_id = ? AND seq = ?"
_EXTEND_CLAIM = "UPDATE tasks SET complete_by = ? + complete_within WHERE id = ?"
_DROP_REPLY = "DELETE FROM replies WHERE id = ?"


@WRITES.handles(StartStep)
def start_step(batch: SqliteBatch, ops: Sequence[StartStep]) -> list[object]:
    """Mark steps `running` and queue their requests (fenced by epoch and owner)."""
    conn, now = batch.conn, batch.now
    found = owners(conn, [op.start.task_id for op in ops])
    plan = plan_starts(
        (op.start for op in ops), found, encode=batch.encode, later=lambda seconds: now + seconds
    )
    conn.executemany(_SUPERSEDE, plan.superseded)
    conn.executemany(_TOUCH, [(at, task_id) for task_id, (_, _, at) in plan.claims.items()])
    if plan.steps:
        conn.executemany(_UPSERT_STEP, [(*row, now) for row in plan.steps])
    if plan.requests:
        conn.executemany(_ENQUEUE, [(*row, now, now) for row in plan.requests])
        batch.rings.add(ch.REQUESTS)
        if any(row[_OWNER_KEY] is not None for row in plan.requests):
            batch.rings.add(ch.CALLS)  # a key's owner looks at its key's calls and steps
    out = plan.outcomes(unix_instant)
    cursor = tuples(conn)
    for index, row, start in plan.handed:
        complete_by = row[_COMPLETE_BY]
        taker = start.taken_by
        if isinstance(taker, OwnerTake):  # taken only behind the owner's fence
            request_id, taken = cursor.execute(_HANDED, handed_params(row, taker, now)).fetchone()
            if taken is None:  # queued: its key's owner takes it
                batch.rings.update((ch.REQUESTS, ch.CALLS))
                continue
        else:
            params = (*row, taker, complete_by, now)
            (request_id,) = cursor.execute(_ENQUEUE_TAKEN, params).fetchone()
        out[index] = handed_request(
            start,
            request_id,
            complete_by=unix_instant(complete_by),
            payload=row[_PAYLOAD],
            created_at=unix_instant(now),
        )
    return out


@WRITES.handles(RecordReplies)
def record_replies(batch: SqliteBatch, ops: Sequence[RecordReplies]) -> list[object]:
    """Take the replies to an owner's tasks; record the current ones on their steps."""
    conn = batch.conn
    out: list[object] = []
    for op in ops:
        # Tuples (a hot path), read by the positions of REPLY_COLUMNS.
        rows = tuples(conn).execute(_REPLIES, (op.locked_by, op.limit)).fetchall()
        replies = sort_replies(rows)
        write_recorded(batch, replies)
        conn.executemany(_DROP_REPLY, [(reply_id,) for reply_id in replies.ids])
        out.append(replies.taken)
    return out


def write_recorded(batch: SqliteBatch, replies: Replies) -> None:
    """Record replies on their steps: results, errors, undone steps, claims, events."""
    conn, now = batch.conn, batch.now
    conn.executemany(_COMPLETED, [(*row, now) for row in replies.completed])
    conn.executemany(_FAILED, [(*row, now) for row in replies.failed])
    conn.executemany(_COMPENSATED, replies.compensated)
    conn.executemany(_EXTEND_CLAIM, [(now, task_id) for task_id in replies.touched])
    batch.events([(*event, now) for event in replies.events])


@WRITES.handles(SleepTask)
def sleep(batch: SqliteBatch, ops: Sequence[SleepTask]) -> list[object]:
    """Record sleep steps and give up their tasks' claims until the wake-up (fenced)."""
    return batch.run(sleeps.sleep(batch, ops))
