"""Columns read from PostgreSQL and the records they become.

The column lists match the SQLite store's, so both backends build their
records the same way; instants come back as aware UTC datetimes.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from shepherd.core.records import Event, Lease, Request, Step, Task
from shepherd.store import rows as shared

__all__ = [
    "EVENT_COLUMNS",
    "REQUEST_COLUMNS_R",
    "STEP_COLUMNS",
    "STEP_COLUMNS_S",
    "TASK_COLUMNS",
    "TASK_COLUMNS_T",
    "TASK_WIDTH",
    "event_from_row",
    "lease_from_row",
    "load",
    "request_from_row",
    "step_from_row",
    "task_from_row",
    "utc",
]

_TASK_NAMES = (
    "id",
    "workflow",
    "key",
    "input",
    "result",
    "error",
    "process_state",
    "locked_by",
    "lock_epoch",
    "complete_by",
    "complete_within",
    "failure_count",
    "not_before",
    "reply_to",
    "cancel_requested",
    "created_at",
    "updated_at",
    "crashes",
    "owner_deaths",
)
_STEP_NAMES = (
    "task_id",
    "seq",
    "kind",
    "agent",
    "state",
    "attempt",
    "complete_by",
    "request",
    "payload_override",
    "result",
    "error",
    "undo",
    "compensates",
)
_REQUEST_NAMES = (
    "id",
    "agent",
    "task_id",
    "seq",
    "attempt",
    "lock_epoch",
    "kind",
    "payload",
    "complete_by",
    "within",
    "retry",
    "suspect",
)


def _columns(names: tuple[str, ...], alias: str = "") -> str:
    prefix = f"{alias}." if alias else ""
    return ", ".join(prefix + name for name in names)


TASK_COLUMNS = _columns(_TASK_NAMES)
#: The task columns qualified by the alias `t`, for statements that join.
TASK_COLUMNS_T = _columns(_TASK_NAMES, "t")
STEP_COLUMNS = _columns(_STEP_NAMES)
STEP_COLUMNS_S = _columns(_STEP_NAMES, "s")
REQUEST_COLUMNS_R = _columns(_REQUEST_NAMES, "r")
EVENT_COLUMNS = "id, task_id, key, reply_to, kind, detail, at"
#: How many columns a task row has (a joined step's columns follow them).
TASK_WIDTH = len(_TASK_NAMES)


load = shared.load


def utc(value: datetime) -> datetime:
    """The same instant with `datetime.UTC` as its zone, as the SQLite store returns it."""
    return value.astimezone(UTC)


def task_from_row(row: tuple[Any, ...], steps: tuple[Step, ...] = ()) -> Task:
    """A Task from a row of TASK_COLUMNS."""
    return shared.task_from_row(row, utc, steps)


def step_from_row(row: tuple[Any, ...]) -> Step:
    """A Step from a row of STEP_COLUMNS; a payload override replaces the request."""
    return shared.step_from_row(row, utc)


def request_from_row(row: tuple[Any, ...]) -> Request:
    """A Request from a row of REQUEST_COLUMNS_R."""
    return shared.request_from_row(row, utc)


def event_from_row(row: tuple[Any, ...]) -> Event:
    """An Event from a row of EVENT_COLUMNS."""
    return shared.event_from_row(row, utc)


def lease_from_row(row: tuple[Any, ...]) -> Lease:
    """A Lease from (name, holder, epoch, expires_at)."""
    return Lease(name=row[0], holder=row[1], epoch=row[2], expires_at=utc(row[3]))
