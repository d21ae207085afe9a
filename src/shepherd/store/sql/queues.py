"""The event log's writes and reads that both backends share: notes, a task's timeline.

The request and reply queues themselves stay with each backend (`queues`):
taking requests is claiming (PostgreSQL's `SKIP LOCKED`, SQLite's write
lock), and a reply's writes are batched over arrays on PostgreSQL. Reading
the events of every task in order differs too: PostgreSQL delivers them in
the order they became final.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.store.rows import EVENT_COLUMNS
from shepherd.store.sql.plan import Query, one

if TYPE_CHECKING:
    from shepherd.core.records import Event
    from shepherd.store.ops import Note, TaskEvents
    from shepherd.store.sql.dialect import Dialect
    from shepherd.store.sql.plan import Plan, Writing

__all__ = ["note", "task_events"]

_NOTED = "SELECT id, key, reply_to FROM tasks WHERE id {list}"
_TASK_EVENTS = f"SELECT {EVENT_COLUMNS} FROM events WHERE task_id = ? ORDER BY id"


def note(batch: Writing, ops: Sequence[Note]) -> Plan[list[object]]:
    """Append events to tasks' histories (an agent that timed out or gave up); unknown tasks are skipped."""
    d = batch.dialect
    ids = list(dict.fromkeys(op.task_id for op in ops))
    found = yield [Query(*d.listed(_NOTED, chunk)) for chunk in d.chunks(ids)]
    meta = {task_id: (key, reply_to) for rows in found for task_id, key, reply_to in rows}
    for op in ops:
        if op.task_id in meta:
            key, reply_to = meta[op.task_id]
            batch.event(op.task_id, key, reply_to, op.kind, batch.dumps_error(op.detail))
    return [None] * len(ops)


def task_events(d: Dialect, op: TaskEvents) -> Plan[list[Event]]:
    """A task's events, oldest first."""
    return [d.records.event(row) for row in (yield from one(d.sql(_TASK_EVENTS), (op.task_id,)))]
