"""Batch handlers for the agents' request queue and the reply queue; the event log's reads.

A request is taken by setting its `taken_by` and hiding it until its
`complete_by` (one conditional UPDATE, under the write lock: two workers never
take the same request). A reply is written and its request removed in one
transaction; a request that was superseded or expired is not replied to.
Events are the applications' queue (`reply_to`) and each task's timeline.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from shepherd.store import signals as ch
from shepherd.store.ops import (
    Note,
    ReadEvents,
    ReplyAndAck,
    ReplyThen,
    TakeRequests,
    TaskEvents,
    Went,
    Write,
)
from shepherd.store.rows import EVENT_COLUMNS, REQUEST_COLUMNS, RequestCol
from shepherd.store.sql import owned_steps, queues, signalling
from shepherd.store.sql.dialect import SQLITE
from shepherd.store.sqlite import slots
from shepherd.store.sqlite.batch import READS, WRITES, Reading
from shepherd.store.sqlite.rows import chunks, event_from_row, request_from_row, tuples
from shepherd.store.sqlite.steps import write_recorded
from shepherd.store.sqlite.tasks import claim_first
from shepherd.store.step_writes import (
    STEP_OWNER_COLUMNS,
    StepOwnerCol,
    encoded_answers,
    go_on,
    plan_answers,
    stale_then,
)

if TYPE_CHECKING:
    from shepherd.core.records import Event
    from shepherd.store.sqlite.batch import SqliteBatch

__all__ = ["note", "read_events", "reply", "reply_then", "take", "task_events"]

# (worker, now, now, agents, now, now, agents, now, now, suspects, limit): requests of healthy
# tasks, and at most `suspects` of suspect ones (tasks that crashed a process before),
# so that a suspect runs apart from others.
# A suspect's window starts when it is taken (it waited in line to run apart):
# its complete_by moves to now + within in the take itself, so that no instant
# passes with the suspect taken and its probation's deadline behind it.
_STARTS = "CASE WHEN suspect = 1 AND within IS NOT NULL THEN ? + within ELSE complete_by END"
_TAKE = (
    f"UPDATE requests SET taken_by = ?, complete_by = {_STARTS}, visible_at = {_STARTS} "
    "WHERE id IN (SELECT id FROM requests WHERE agent IN ({marks}) "
    "AND visible_at <= ? AND complete_by > ? AND owner_key IS NULL AND (suspect = 0 OR id IN "
    "(SELECT id FROM requests WHERE agent IN ({marks}) AND suspect = 1 "
    "AND visible_at <= ? AND complete_by > ? ORDER BY id LIMIT ?)) "
    "ORDER BY id LIMIT ?) "
    f"RETURNING {REQUEST_COLUMNS}"
)
# A request is the worker's by its id and lease, and is the one replied to by its
# step and attempt: SQLite gives a deleted request's id to the next one queued, which
# the same worker may hold while an older reply of its own is being retried.
_LIVE = (
    "SELECT id, taken_by, task_id, seq, attempt FROM requests "
    "WHERE id IN ({marks}) AND complete_by > ?"
)
_ACK = "DELETE FROM requests WHERE id = ?"
_INSERT_REPLY = (
    "INSERT INTO replies (task_id, seq, attempt, lock_epoch, ok, body, trace, created_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
# The steps of the replied tasks (a task has a few), for replies recorded where made.
_STEP_OWNERS = (
    f"SELECT {STEP_OWNER_COLUMNS} FROM tasks t JOIN steps s ON s.task_id = t.id "
    "WHERE t.id IN ({marks})"
)
_ALL_EVENTS = f"SELECT {EVENT_COLUMNS} FROM events WHERE id > ? ORDER BY id LIMIT ?"
_EVENTS_FOR = (
    f"SELECT {EVENT_COLUMNS} FROM events WHERE reply_to = ? AND id > ? ORDER BY id LIMIT ?"
)


@WRITES.handles(TakeRequests)
def take(batch: SqliteBatch, ops: Sequence[TakeRequests]) -> list[object]:
    """Lease visible requests of the given agents to a worker, oldest first."""
    conn, now = batch.conn, batch.now
    out: list[object] = []
    for op in ops:
        agents, worker, limit, suspects = op.agents, op.worker, op.limit, op.suspects
        marks = ",".join("?" * len(agents))
        rows = (
            tuples(conn)
            .execute(
                _TAKE.format(marks=marks),
                (worker, now, now, *agents, now, now, *agents, now, now, max(suspects, 0), limit),
            )
            .fetchall()
        )
        rows.sort(key=lambda r: r[RequestCol.ID])  # RETURNING order is unspecified
        out.append([request_from_row(r) for r in rows])
    return out


@WRITES.handles(ReplyAndAck)
def reply(batch: SqliteBatch, ops: Sequence[ReplyAndAck]) -> list[object]:
    """Remove requests and answer them: queue each reply, or record it for a local scheduler.

    False for a request no longer the worker's. The capacity slots the handlings
    held are given back in the same transaction.
    """
    conn, now = batch.conn, batch.now
    live: set[tuple[int, str, str, int, int]] = set()
    for chunk in chunks([op.request.id for op in ops]):
        marks = ",".join("?" * len(chunk))
        live.update(tuples(conn).execute(_LIVE.format(marks=marks), (*chunk, now)).fetchall())
    acked = [
        (op.request.id, op.worker, op.request.task_id, op.request.seq, op.request.attempt) in live
        for op in ops
    ]
    local = [op.request.task_id for op, ok in zip(ops, acked, strict=True) if ok and op.recorder]
    steps = {}
    for tasks in chunks(list(dict.fromkeys(local))):
        query = _STEP_OWNERS.format(marks=",".join("?" * len(tasks)))
        for row in tuples(conn).execute(query, tasks):
            steps[row[StepOwnerCol.TASK_ID], row[StepOwnerCol.SEQ]] = row
    plan = plan_answers(encoded_answers(ops, batch), acked, steps)
    conn.executemany(_ACK, [(op.request.id,) for op, ok in zip(ops, acked, strict=True) if ok])
    slots.release(batch, [op.slot for op in ops if op.slot is not None])
    if plan.queued:
        conn.executemany(
            _INSERT_REPLY, [(*row[:4], int(row[4]), *row[5:], now) for row in plan.queued]
        )
        batch.rings.add(ch.REPLIES)
    write_recorded(batch, plan.recorded)
    return list(plan.out)


@WRITES.handles(ReplyThen)
def reply_then(batch: SqliteBatch, ops: Sequence[ReplyThen]) -> list[object]:
    """Record replies made here; write each operation's `then` if its replies all counted.

    The claims of the operations that claim their task come first
    (`claim_first`); then every operation's replies are written as one
    `reply_and_ack` batch, then the `then`s that go, grouped by kind, each by
    its own handler.
    """
    claimed = claim_first(batch, ops) if any(op.claim is not None for op in ops) else None
    replies, kept = batch.run(owned_steps.fenced_replies(batch, ops))
    written = reply(batch, [replies[i] for i in kept]) if kept else []
    decided = go_on(ops, owned_steps.spread(len(replies), kept, written), claimed)
    if any(op.waits for op in ops):
        decided = batch.run(signalling.waited_first(batch, ops, decided))
    thens: list[object] = [None] * len(ops)
    grouped: dict[type[Write[Any]], list[int]] = defaultdict(list)
    for i, (op, (_, counted)) in enumerate(zip(ops, decided, strict=True)):
        if counted:
            grouped[type(op.then)].append(i)
        else:
            thens[i] = stale_then(op)
    for kind, indexes in grouped.items():
        outcomes = WRITES[kind](batch, [ops[i].then for i in indexes])
        for i, outcome in zip(indexes, outcomes, strict=True):
            thens[i] = outcome
    return [Went(mine, then) for (mine, _), then in zip(decided, thens, strict=True)]


@WRITES.handles(Note)
def note(batch: SqliteBatch, ops: Sequence[Note]) -> list[object]:
    """Append events of the given kinds to tasks' timelines (unknown tasks are skipped)."""
    return batch.run(queues.note(batch, ops))


# -- reads ---------------------------------------------------------------------
@READS.handles(TaskEvents)
def task_events(at: Reading, op: TaskEvents) -> list[Event]:
    """A task's events, oldest first."""
    return at.run(queues.task_events(SQLITE, op))


@READS.handles(ReadEvents)
def read_events(at: Reading, op: ReadEvents) -> list[Event]:
    """Events after `after_id` in id order: all of them, or those for `reply_to`."""
    conn = at.conn
    reply_to, after_id, limit = op.reply_to, op.after_id, op.limit
    if reply_to is None:
        rows = conn.execute(_ALL_EVENTS, (after_id, limit)).fetchall()
    else:
        rows = conn.execute(_EVENTS_FOR, (reply_to, after_id, limit)).fetchall()
    return [event_from_row(r) for r in rows]
