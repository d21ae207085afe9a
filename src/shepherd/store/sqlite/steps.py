"""Batch handlers for steps: start a step with its request, record agents' replies.

`start_step` is the transactional outbox: the step turns `running` and its
request is queued in the same transaction, fenced by the owner's epoch (read
under the write lock before anything is written). `record_replies` records
only replies for the task's current epoch and the running step's current
attempt; the others are dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from shepherd.core.records import Reply
from shepherd.errors import StaleEpochError
from shepherd.payloads import dumps_detail
from shepherd.store import signals as ch
from shepherd.store.contract import REPLY_GRACE
from shepherd.store.ops import RecordReplies, StartStep
from shepherd.store.rows import reply_event, taken_reply
from shepherd.store.sqlite.batch import WRITES
from shepherd.store.sqlite.rows import owners, tuples

if TYPE_CHECKING:
    from shepherd.store.sqlite.batch import Batch, EventRow

__all__ = ["record_replies", "start_step"]

_SUPERSEDE = "DELETE FROM requests WHERE task_id = ? AND seq = ?"
_TOUCH = "UPDATE tasks SET complete_by = ?, updated_at = ? WHERE id = ?"
_UPSERT_STEP = (
    "INSERT INTO steps (task_id, seq, kind, agent, state, attempt, complete_by, "
    "request, undo, compensates, started_at) "
    "VALUES (?, ?, ?, ?, 'running', ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (task_id, seq) DO UPDATE SET state = 'running', "
    "attempt = excluded.attempt, complete_by = excluded.complete_by, "
    "agent = excluded.agent, kind = excluded.kind, request = excluded.request, "
    "undo = excluded.undo, compensates = excluded.compensates, error = NULL, "
    "started_at = excluded.started_at"
)
_ENQUEUE = (
    "INSERT INTO requests (agent, task_id, seq, attempt, lock_epoch, kind, payload, "
    "complete_by, within, retry, suspect, visible_at, created_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_REPLIES = (
    "SELECT r.id, r.task_id, r.seq, r.attempt, r.lock_epoch, r.ok, r.body, "
    "t.lock_epoch, t.key, t.reply_to, s.state, s.attempt, s.agent, s.kind, s.compensates "
    "FROM replies r JOIN tasks t ON t.id = r.task_id "
    "LEFT JOIN steps s ON s.task_id = r.task_id AND s.seq = r.seq "
    "WHERE t.locked_by = ? ORDER BY r.id LIMIT ?"
)
_COMPLETED = (
    "UPDATE steps SET state = 'completed', result = ?, finished_at = ? "
    "WHERE task_id = ? AND seq = ?"
)
_FAILED = (
    "UPDATE steps SET state = 'failed', error = ?, finished_at = ? WHERE task_id = ? AND seq = ?"
)
_COMPENSATED = "UPDATE steps SET state = 'compensated' WHERE task_id = ? AND seq = ?"
_EXTEND_CLAIM = "UPDATE tasks SET complete_by = ? + complete_within, updated_at = ? WHERE id = ?"
_DROP_REPLY = "DELETE FROM replies WHERE id = ?"


@WRITES.handles(StartStep)
def start_step(batch: Batch, ops: Sequence[StartStep]) -> list[object]:
    """Mark steps `running` and queue their requests (fenced by epoch and owner)."""
    conn, now = batch.conn, batch.now
    out: list[object] = []
    steps = []
    requests = []
    touched = []
    superseded = []
    found = owners(conn, [op.start.task_id for op in ops])
    for s in (op.start for op in ops):
        if found.get(s.task_id) != (s.epoch, s.owner):
            out.append(StaleEpochError(s.task_id, s.epoch))
            continue
        try:
            payload = batch.dumps(s.payload)
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
                None if s.retry is None else dumps_detail(s.retry),
                int(s.suspect),
                now,
                now,
            )
        )
        batch.rings.add(ch.REQUESTS)
        out.append(datetime.fromtimestamp(complete_by, UTC))
    if superseded:
        conn.executemany(_SUPERSEDE, superseded)
    if touched:
        conn.executemany(_TOUCH, touched)
    if steps:
        conn.executemany(_UPSERT_STEP, steps)
        conn.executemany(_ENQUEUE, requests)
    return out


@WRITES.handles(RecordReplies)
def record_replies(batch: Batch, ops: Sequence[RecordReplies]) -> list[object]:
    """Take the replies to an owner's tasks; record the current ones on their steps."""
    conn, now = batch.conn, batch.now
    out: list[object] = []
    for op in ops:
        owner, limit = op.owner, op.limit
        # Tuples read by position (a hot path): 0 reply id, 1 task_id, 2 seq, 6 body,
        # 8 key, 9 reply_to, 13 the step's kind, 14 compensates (see _REPLIES).
        rows = tuples(conn).execute(_REPLIES, (owner, limit)).fetchall()
        taken: list[tuple[Reply, bool]] = []
        completed = []
        failed = []
        compensated = []
        touched = []
        events: list[EventRow] = []
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
            conn.executemany(_COMPLETED, completed)
        if failed:
            conn.executemany(_FAILED, failed)
        if compensated:
            conn.executemany(_COMPENSATED, compensated)
        if touched:
            conn.executemany(_EXTEND_CLAIM, touched)
        if rows:
            conn.executemany(_DROP_REPLY, [(r[0],) for r in rows])
        batch.events(events)
        out.append(taken)
    return out
