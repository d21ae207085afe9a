"""Rows to records, for both backends: where each column stands, and what it becomes.

Each column list is a `Columns` class whose constants are the positions of its
columns (`row[TaskCol.NOT_BEFORE]`); the SELECT list is made from the same
class, so a position cannot drift from the statement. A record of a few
columns unpacks its row in the declared order instead. Rows stay plain tuples
(no dict or named rows: the hot paths build thousands of records a second).
Each backend makes one `Records` with its `instant`, which turns its native
time column (unix seconds for SQLite, timestamptz for PostgreSQL) into an
aware UTC datetime.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any, ClassVar, final

from shepherd.core.records import Event, JsonValue, Lease, Request, Step, Task
from shepherd.core.resources import Resolution
from shepherd.core.retention import Tombstone
from shepherd.core.states import ProcessState, StepKind, StepState
from shepherd.payloads import load_stored

__all__ = [
    "EVENT_COLUMNS",
    "LEASE_COLUMNS",
    "OWNER_COLUMNS",
    "REQUEST_COLUMNS",
    "STEP_COLUMNS",
    "TASK_COLUMNS",
    "TOMBSTONE_COLUMNS",
    "Columns",
    "EventCol",
    "Instant",
    "LeaseCol",
    "OwnerCol",
    "Owners",
    "Records",
    "RequestCol",
    "Row",
    "StepCol",
    "TaskCol",
    "TombstoneCol",
    "load",
    "load_resolution",
    "unix_instant",
]

Instant = Callable[[Any], datetime]
#: A row as the drivers return it: a tuple (or a `sqlite3.Row`, read the same way).
Row = tuple[Any, ...]


class Columns:
    """The columns of one SELECT list, declared in order: each constant is its column's position.

    A subclass declares its columns as `NAME: ClassVar[int]`, in the order they
    are selected; the class then sets each to its position (0, 1, ...). The
    constant `NOT_BEFORE` stands for the column `not_before`, and `select()`
    writes the SELECT list from the same declarations, so a position cannot
    drift from its statement.
    """

    _names: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        declared = tuple(inspect.get_annotations(cls))
        if not declared or not all(name.isupper() for name in declared):
            raise TypeError(f"{cls.__name__}: declare each column as NAME: ClassVar[int]")
        for position, name in enumerate(declared):
            setattr(cls, name, position)
        cls._names = tuple(name.lower() for name in declared)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The column names, in order."""
        return cls._names

    @classmethod
    def select(cls, alias: str = "") -> str:
        """The SELECT list, each name qualified by `alias` when one is given."""
        prefix = f"{alias}." if alias else ""
        return ", ".join(prefix + name for name in cls._names)


class TaskCol(Columns):
    """A row of TASK_COLUMNS."""

    ID: ClassVar[int]
    WORKFLOW: ClassVar[int]
    KEY: ClassVar[int]
    INPUT: ClassVar[int]
    RESULT: ClassVar[int]
    ERROR: ClassVar[int]
    PROCESS_STATE: ClassVar[int]
    LOCKED_BY: ClassVar[int]
    LOCK_EPOCH: ClassVar[int]
    COMPLETE_BY: ClassVar[int]
    COMPLETE_WITHIN: ClassVar[int]
    FAILURE_COUNT: ClassVar[int]
    NOT_BEFORE: ClassVar[int]
    REPLY_TO: ClassVar[int]
    CANCEL_REQUESTED: ClassVar[int]
    CREATED_AT: ClassVar[int]
    UPDATED_AT: ClassVar[int]
    CRASHES: ClassVar[int]
    OWNER_DEATHS: ClassVar[int]
    TRACE: ClassVar[int]
    DEADLINE: ClassVar[int]


class StepCol(Columns):
    """A row of STEP_COLUMNS."""

    TASK_ID: ClassVar[int]
    SEQ: ClassVar[int]
    KIND: ClassVar[int]
    AGENT: ClassVar[int]
    STATE: ClassVar[int]
    ATTEMPT: ClassVar[int]
    COMPLETE_BY: ClassVar[int]
    REQUEST: ClassVar[int]
    PAYLOAD_OVERRIDE: ClassVar[int]
    RESULT: ClassVar[int]
    ERROR: ClassVar[int]
    UNDO: ClassVar[int]
    COMPENSATES: ClassVar[int]
    RESOLUTION: ClassVar[int]


class RequestCol(Columns):
    """A row of REQUEST_COLUMNS."""

    ID: ClassVar[int]
    AGENT: ClassVar[int]
    TASK_ID: ClassVar[int]
    SEQ: ClassVar[int]
    ATTEMPT: ClassVar[int]
    LOCK_EPOCH: ClassVar[int]
    KIND: ClassVar[int]
    PAYLOAD: ClassVar[int]
    COMPLETE_BY: ClassVar[int]
    WITHIN: ClassVar[int]
    RETRY: ClassVar[int]
    SUSPECT: ClassVar[int]
    RESOLUTION: ClassVar[int]
    CREATED_AT: ClassVar[int]
    TRACE: ClassVar[int]


class EventCol(Columns):
    """A row of EVENT_COLUMNS."""

    ID: ClassVar[int]
    TASK_ID: ClassVar[int]
    KEY: ClassVar[int]
    REPLY_TO: ClassVar[int]
    KIND: ClassVar[int]
    DETAIL: ClassVar[int]
    AT: ClassVar[int]


class LeaseCol(Columns):
    """A row of LEASE_COLUMNS."""

    NAME: ClassVar[int]
    HOLDER: ClassVar[int]
    EPOCH: ClassVar[int]
    EXPIRES_AT: ClassVar[int]


class TombstoneCol(Columns):
    """A row of TOMBSTONE_COLUMNS."""

    TASK_ID: ClassVar[int]
    WORKFLOW: ClassVar[int]
    KEY: ClassVar[int]
    PROCESS_STATE: ClassVar[int]
    ENDED_AT: ClassVar[int]
    PURGED_AT: ClassVar[int]


class OwnerCol(Columns):
    """A row of OWNER_COLUMNS: what an owner's write is fenced by, its events' fields, and
    whether the task has had an alert (`alerted`: its end resolves it)."""

    ID: ClassVar[int]
    LOCK_EPOCH: ClassVar[int]
    LOCKED_BY: ClassVar[int]
    KEY: ClassVar[int]
    REPLY_TO: ClassVar[int]
    ALERTED: ClassVar[int]


TASK_COLUMNS = TaskCol.select()
STEP_COLUMNS = StepCol.select()
REQUEST_COLUMNS = RequestCol.select()
EVENT_COLUMNS = EventCol.select()
LEASE_COLUMNS = LeaseCol.select()
TOMBSTONE_COLUMNS = TombstoneCol.select()
OWNER_COLUMNS = OwnerCol.select()

# Stored values to their members, looked up on every row: a dict lookup costs a
# fraction of the enum's own call (`ProcessState(value)`).
_PROCESS_STATES = {state.value: state for state in ProcessState}
_STEP_KINDS = {kind.value: kind for kind in StepKind}
_STEP_STATES = {state.value: state for state in StepState}


class Owners(dict[str, tuple[int, str | None]]):
    """task id -> (lock_epoch, locked_by) as a batch found them; (key, reply_to) in `meta`;
    the tasks that have had an alert in `alerted`."""

    def __init__(self) -> None:
        super().__init__()
        self.meta: dict[str, tuple[str | None, str | None]] = {}
        self.alerted: set[str] = set()

    def add(self, rows: Iterable[Row]) -> None:
        """Add rows of OWNER_COLUMNS."""
        meta = self.meta
        for task_id, lock_epoch, locked_by, key, reply_to, alerted in rows:
            self[task_id] = (lock_epoch, locked_by)
            meta[task_id] = (key, reply_to)
            if alerted:
                self.alerted.add(task_id)


def unix_instant(value: float) -> datetime:
    """SQLite's instant: unix seconds to an aware UTC datetime."""
    return datetime.fromtimestamp(value, UTC)


def load(text: str | None) -> JsonValue:
    """Decode a stored JSON column (None stays None)."""
    return load_stored(text)


def load_resolution(text: str | None) -> Resolution | None:
    """Decode a step's or a request's `resolution` column (None stays None)."""
    return None if text is None else Resolution.from_json(load_stored(text))


@final
class Records:
    """Rows of this module's column lists as records, with one backend's instants.

    Args:
        instant: Turns the backend's time column into an aware UTC datetime.
    """

    __slots__ = ("instant",)

    def __init__(self, instant: Instant) -> None:
        self.instant = instant

    def task(self, row: Row, steps: tuple[Step, ...] = ()) -> Task:
        """A Task from a row of TASK_COLUMNS, with its steps."""
        instant = self.instant
        complete_by = row[TaskCol.COMPLETE_BY]
        deadline = row[TaskCol.DEADLINE]
        return Task(
            id=row[TaskCol.ID],
            workflow=row[TaskCol.WORKFLOW],
            key=row[TaskCol.KEY],
            input=load_stored(row[TaskCol.INPUT]),
            result=load_stored(row[TaskCol.RESULT]),
            error=load_stored(row[TaskCol.ERROR]),
            process_state=_PROCESS_STATES[row[TaskCol.PROCESS_STATE]],
            locked_by=row[TaskCol.LOCKED_BY],
            lock_epoch=row[TaskCol.LOCK_EPOCH],
            complete_by=None if complete_by is None else instant(complete_by),
            failure_count=row[TaskCol.FAILURE_COUNT],
            not_before=instant(row[TaskCol.NOT_BEFORE]),
            reply_to=row[TaskCol.REPLY_TO],
            cancel_requested=bool(row[TaskCol.CANCEL_REQUESTED]),
            created_at=instant(row[TaskCol.CREATED_AT]),
            updated_at=instant(row[TaskCol.UPDATED_AT]),
            steps=steps,
            crashes=tuple(load_stored(row[TaskCol.CRASHES])),
            owner_deaths=row[TaskCol.OWNER_DEATHS],
            trace=row[TaskCol.TRACE],
            deadline=None if deadline is None else instant(deadline),
        )

    def step(self, row: Row) -> Step:
        """A Step from a row of STEP_COLUMNS; an operator's payload replaces the request."""
        complete_by = row[StepCol.COMPLETE_BY]
        override = row[StepCol.PAYLOAD_OVERRIDE]
        return Step(
            task_id=row[StepCol.TASK_ID],
            seq=row[StepCol.SEQ],
            kind=_STEP_KINDS[row[StepCol.KIND]],
            agent=row[StepCol.AGENT],
            state=_STEP_STATES[row[StepCol.STATE]],
            attempt=row[StepCol.ATTEMPT],
            complete_by=None if complete_by is None else self.instant(complete_by),
            request=load_stored(row[StepCol.REQUEST] if override is None else override),
            result=load_stored(row[StepCol.RESULT]),
            error=load_stored(row[StepCol.ERROR]),
            undo=row[StepCol.UNDO],
            compensates=row[StepCol.COMPENSATES],
            resolution=load_resolution(row[StepCol.RESOLUTION]),
        )

    def request(self, row: Row) -> Request:
        """A Request from a row of REQUEST_COLUMNS."""
        retry = row[RequestCol.RETRY]
        return Request(
            id=row[RequestCol.ID],
            agent=row[RequestCol.AGENT],
            task_id=row[RequestCol.TASK_ID],
            seq=row[RequestCol.SEQ],
            attempt=row[RequestCol.ATTEMPT],
            lock_epoch=row[RequestCol.LOCK_EPOCH],
            kind=_STEP_KINDS[row[RequestCol.KIND]],
            payload=load_stored(row[RequestCol.PAYLOAD]),
            complete_by=self.instant(row[RequestCol.COMPLETE_BY]),
            within=row[RequestCol.WITHIN],
            retry=None if retry is None else load_stored(retry),
            suspect=bool(row[RequestCol.SUSPECT]),
            resolution=load_resolution(row[RequestCol.RESOLUTION]),
            created_at=self.instant(row[RequestCol.CREATED_AT]),
            trace=row[RequestCol.TRACE],
        )

    def event(self, row: Row) -> Event:
        """An Event from a row of EVENT_COLUMNS."""
        event_id, task_id, key, reply_to, kind, detail, at = row
        return Event(
            id=event_id,
            task_id=task_id,
            key=key,
            reply_to=reply_to,
            kind=kind,
            detail=load_stored(detail),
            at=self.instant(at),
        )

    def lease(self, row: Row) -> Lease:
        """A Lease from a row of LEASE_COLUMNS."""
        name, holder, epoch, expires_at = row
        return Lease(name=name, holder=holder, epoch=epoch, expires_at=self.instant(expires_at))

    def tombstone(self, row: Row) -> Tombstone:
        """A Tombstone from a row of TOMBSTONE_COLUMNS."""
        task_id, workflow, key, process_state, ended_at, purged_at = row
        return Tombstone(
            task_id=task_id,
            workflow=workflow,
            key=key,
            process_state=_PROCESS_STATES[process_state],
            ended_at=self.instant(ended_at),
            purged_at=self.instant(purged_at),
        )
