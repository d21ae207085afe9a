"""Columns read from PostgreSQL and the records they become.

The column lists match the SQLite store's, so both backends build their
records the same way; instants come back as aware UTC datetimes.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from shepherd.core.records import Event, JsonValue, Lease, Request, Step, Task
from shepherd.core.states import ProcessState, StepKind, StepState

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

_LOADS = json.loads


def load(text: str | None) -> JsonValue:
    """Decode a stored JSON column (None stays None)."""
    return None if text is None else _LOADS(text)


def utc(value: datetime) -> datetime:
    """The same instant with `datetime.UTC` as its zone, as the SQLite store returns it."""
    return value.astimezone(UTC)


def _utc_or_none(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(UTC)


def task_from_row(row: tuple[Any, ...], steps: tuple[Step, ...] = ()) -> Task:
    """A Task from a row of TASK_COLUMNS."""
    return Task(
        id=row[0],
        workflow=row[1],
        key=row[2],
        input=load(row[3]),
        result=load(row[4]),
        error=load(row[5]),
        process_state=ProcessState(row[6]),
        locked_by=row[7],
        lock_epoch=row[8],
        complete_by=_utc_or_none(row[9]),
        failure_count=row[11],
        not_before=utc(row[12]),
        reply_to=row[13],
        cancel_requested=bool(row[14]),
        created_at=utc(row[15]),
        updated_at=utc(row[16]),
        steps=steps,
    )


def step_from_row(row: tuple[Any, ...]) -> Step:
    """A Step from a row of STEP_COLUMNS; a payload override replaces the request."""
    override = row[8]
    return Step(
        task_id=row[0],
        seq=row[1],
        kind=StepKind(row[2]),
        agent=row[3],
        state=StepState(row[4]),
        attempt=row[5],
        complete_by=_utc_or_none(row[6]),
        request=load(override if override is not None else row[7]),
        result=load(row[9]),
        error=load(row[10]),
        undo=row[11],
        compensates=row[12],
    )


def request_from_row(row: tuple[Any, ...]) -> Request:
    """A Request from a row of REQUEST_COLUMNS_R."""
    return Request(
        id=row[0],
        agent=row[1],
        task_id=row[2],
        seq=row[3],
        attempt=row[4],
        lock_epoch=row[5],
        kind=StepKind(row[6]),
        payload=_LOADS(row[7]),
        complete_by=utc(row[8]),
    )


def event_from_row(row: tuple[Any, ...]) -> Event:
    """An Event from a row of EVENT_COLUMNS."""
    return Event(
        id=row[0],
        task_id=row[1],
        key=row[2],
        reply_to=row[3],
        kind=row[4],
        detail=_LOADS(row[5]),
        at=utc(row[6]),
    )


def lease_from_row(row: tuple[Any, ...]) -> Lease:
    """A Lease from (name, holder, epoch, expires_at)."""
    return Lease(name=row[0], holder=row[1], epoch=row[2], expires_at=utc(row[3]))
