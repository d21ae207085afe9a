"""SQLite rows: the records they become, and plain tuples for the hot paths.

The column lists and their positions are `shepherd.store.rows`', shared with
PostgreSQL. The store's connection returns `sqlite3.Row`s, read by column
name; the hot paths read plain tuples (`tuples`) by the positions that module
names. Instants are unix seconds (REAL).
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, TypeVar

from shepherd.store.rows import (
    EVENT_COLUMNS,
    OWNER_COLUMNS,
    REQUEST_COLUMNS,
    STEP_COLUMNS,
    TASK_COLUMNS,
    Owners,
    Records,
    StepCol,
    TaskCol,
    unix_instant,
)

if TYPE_CHECKING:
    from datetime import datetime

__all__ = [
    "CHUNK",
    "EVENT_COLUMNS",
    "RECORDS",
    "REQUEST_COLUMNS",
    "STEP_COLUMNS",
    "TASK_COLUMNS",
    "Owners",
    "StepCol",
    "TaskCol",
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

#: Most `?` marks in one `IN (...)` list.
CHUNK = 500

#: Records from this store's rows (instants in unix seconds).
RECORDS = Records(unix_instant)
task_from_row = RECORDS.task
step_from_row = RECORDS.step
request_from_row = RECORDS.request
event_from_row = RECORDS.event

_OWNERS = f"SELECT {OWNER_COLUMNS} FROM tasks WHERE id IN ({{marks}})"


def ts(value: datetime) -> float:
    """An aware datetime as this store's instant: unix seconds."""
    return value.timestamp()


def owners(conn: sqlite3.Connection, task_ids: list[str]) -> Owners:
    """Read the fencing columns of many tasks in few statements (inside the write lock)."""
    found = Owners()
    for chunk in chunks(list(dict.fromkeys(task_ids))):
        marks = ",".join("?" * len(chunk))
        found.add(tuples(conn).execute(_OWNERS.format(marks=marks), chunk))
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
