"""A task's history: the events appended to it, read back by task or by reply queue."""

from __future__ import annotations

from dataclasses import KW_ONLY

from shepherd.core.records import Event, JsonValue
from shepherd.store.ops.base import Read, Runs, Write, method, operation

__all__ = ["Events", "Note", "ReadEvents", "TaskEvents"]


@operation
class TaskEvents(Read[list[Event]]):
    """The task's history, oldest first."""

    task_id: str


@operation
class ReadEvents(Read[list[Event]]):
    """Up to `limit` events after `after_id`, oldest first (for one `reply_to`, or all when None)."""

    _: KW_ONLY
    reply_to: str | None
    after_id: int
    limit: int = 1000


@operation
class Note(Write[None]):
    """Append an event to a task's history (an agent that timed out or gave up).

    `detail` is an error body: cut to the payload limit and marked
    `"truncated": true`, never refused.
    """

    task_id: str
    kind: str
    detail: JsonValue


class Events(Runs):
    """The store's methods for tasks' histories."""

    task_events = method(TaskEvents)
    read_events = method(ReadEvents)
    note = method(Note)
