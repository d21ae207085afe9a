"""SQLite rows: the column lists statements select, and the records they become.

The store's connection returns `sqlite3.Row`s, so handlers read columns by
name; the hot paths read plain tuples by position instead (`tuples`).
Instants are unix seconds (REAL); `shepherd.store.rows` turns rows into
records for both backends (by position: PostgreSQL's rows are tuples), given
`unix_instant`.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any, TypeVar

from shepherd.store import rows as shared
from shepherd.store.rows import unix_instant

if TYPE_CHECKING:
    from datetime import datetime

    from shepherd.core.records import Event, Request, Step, Task

__all__ = [
    "CHUNK",
    "EVENT_COLUMNS",
    "REQUEST_COLUMNS",
    "STEP_COLUMNS",
    "TASK_COLUMNS",
    "Owners",
    "chunks",
    "event_from_row",
    "owners",
    "request_from_row",
    "step_from_row",
    "task_from_row",
    "ts",
    "tuples",
]

T = TypeVar("T")

TASK_COLUMNS = (
    "id, workflow, key, input, result, error, process_state, locked_by, lock_epoch, "
    "complete_by, complete_within, failure_count, not_before, reply_to, cancel_requested, "
    "created_at, updated_at, crashes, owner_deaths"
)
STEP_COLUMNS = (
    "task_id, seq, kind, agent, state, attempt, complete_by, request, payload_override, "
    "result, error, undo, compensates"
)
REQUEST_COLUMNS = (
    "id, agent, task_id, seq, attempt, lock_epoch, kind, payload, complete_by, within, retry, "
    "suspect"
)
EVENT_COLUMNS = "id, task_id, key, reply_to, kind, detail, at"

#: Most `?` marks in one `IN (...)` list.
CHUNK = 500


def ts(value: datetime) -> float:
    """An aware datetime as this store's instant: unix seconds."""
    return value.timestamp()


def task_from_row(row: tuple[Any, ...], steps: tuple[Step, ...] = ()) -> Task:
    """A Task from a row of TASK_COLUMNS."""
    return shared.task_from_row(row, unix_instant, steps)


def step_from_row(row: tuple[Any, ...]) -> Step:
    """A Step from a row of STEP_COLUMNS."""
    return shared.step_from_row(row, unix_instant)


def request_from_row(row: tuple[Any, ...]) -> Request:
    """A Request from a row of REQUEST_COLUMNS."""
    return shared.request_from_row(row, unix_instant)


def event_from_row(row: tuple[Any, ...]) -> Event:
    """An Event from a row of EVENT_COLUMNS."""
    return shared.event_from_row(row, unix_instant)


class Owners(dict[str, tuple[int, str | None]]):
    """task id -> (lock_epoch, locked_by), plus (key, reply_to) in `meta`."""

    def __init__(self) -> None:
        super().__init__()
        self.meta: dict[str, tuple[str | None, str | None]] = {}


def owners(conn: sqlite3.Connection, task_ids: list[str]) -> Owners:
    """Read the fencing columns of many tasks in few statements (inside the write lock)."""
    found = Owners()
    for chunk in chunks(list(dict.fromkeys(task_ids))):
        marks = ",".join("?" * len(chunk))
        for task_id, lock_epoch, locked_by, key, reply_to in tuples(conn).execute(
            f"SELECT id, lock_epoch, locked_by, key, reply_to FROM tasks WHERE id IN ({marks})",
            chunk,
        ):
            found[task_id] = (lock_epoch, locked_by)
            found.meta[task_id] = (key, reply_to)
    return found


def tuples(conn: sqlite3.Connection) -> sqlite3.Cursor:
    """A cursor on `conn` whose rows are plain tuples, read by position.

    The store's connection returns `sqlite3.Row`s, read by column name. The
    hot paths (claim, start_step, take, reply, record_replies, finish) read
    tuples instead: building a Row and looking its columns up by name made
    those handlers 2-5% slower.
    """
    cursor = conn.cursor()
    cursor.row_factory = None
    return cursor


def chunks(items: list[T], size: int = CHUNK) -> list[list[T]]:
    """`items` in lists of at most `size` (SQLite limits the parameters of a statement)."""
    return [items[i : i + size] for i in range(0, len(items), size)]
