"""Rows to records, for both backends: the columns come in one order everywhere.

Each backend passes `instant`, which turns its native time column (unix seconds
for SQLite, timestamptz for PostgreSQL) into an aware UTC datetime.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from shepherd.core.events import EventKind
from shepherd.core.records import Event, JsonValue, Reply, Request, Step, Task
from shepherd.core.states import ProcessState, StepKind, StepState
from shepherd.payloads import dumps_detail, load_stored

Instant = Callable[[Any], datetime]


def unix_instant(value: float) -> datetime:
    """SQLite's instant: unix seconds to an aware UTC datetime."""
    return datetime.fromtimestamp(value, UTC)


def load(text: str | None) -> JsonValue:
    """Decode a stored JSON column (None stays None)."""
    return load_stored(text)


def task_from_row(row: tuple[Any, ...], instant: Instant, steps: tuple[Step, ...] = ()) -> Task:
    """A Task from a row of the task columns (id ... updated_at, crashes, owner_deaths)."""
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
        complete_by=None if row[9] is None else instant(row[9]),
        failure_count=row[11],
        not_before=instant(row[12]),
        reply_to=row[13],
        cancel_requested=bool(row[14]),
        created_at=instant(row[15]),
        updated_at=instant(row[16]),
        steps=steps,
        crashes=tuple(load_stored(row[17])) if len(row) > 17 else (),
        owner_deaths=row[18] if len(row) > 18 else 0,
    )


def step_from_row(row: tuple[Any, ...], instant: Instant) -> Step:
    """A Step from a row of the step columns; an operator's payload replaces the request."""
    override = row[8]
    return Step(
        task_id=row[0],
        seq=row[1],
        kind=StepKind(row[2]),
        agent=row[3],
        state=StepState(row[4]),
        attempt=row[5],
        complete_by=None if row[6] is None else instant(row[6]),
        request=load(override if override is not None else row[7]),
        result=load(row[9]),
        error=load(row[10]),
        undo=row[11],
        compensates=row[12],
    )


def request_from_row(row: tuple[Any, ...], instant: Instant) -> Request:
    """A Request from (id, agent, task_id, seq, attempt, lock_epoch, kind, payload, complete_by,
    within, retry)."""
    return Request(
        id=row[0],
        agent=row[1],
        task_id=row[2],
        seq=row[3],
        attempt=row[4],
        lock_epoch=row[5],
        kind=StepKind(row[6]),
        payload=load_stored(row[7]),
        complete_by=instant(row[8]),
        within=row[9],
        retry=None if row[10] is None else load_stored(row[10]),
        suspect=bool(row[11]) if len(row) > 11 else False,
    )


def event_from_row(row: tuple[Any, ...], instant: Instant) -> Event:
    """An Event from (id, task_id, key, reply_to, kind, detail, at)."""
    return Event(
        id=row[0],
        task_id=row[1],
        key=row[2],
        reply_to=row[3],
        kind=row[4],
        detail=load_stored(row[5]),
        at=instant(row[6]),
    )


def taken_reply(row: tuple[Any, ...]) -> tuple[Reply, bool]:
    """A reply read with its task and step, and whether it may be recorded.

    The row is (reply id, task_id, seq, attempt, lock_epoch, ok, body, the task's
    lock_epoch, key, reply_to, the step's state, attempt, agent, kind, compensates).
    A reply counts only for the task's current epoch and the running step's
    current attempt; any other is from an attempt someone has given up on.
    """
    reply = Reply(
        id=row[0],
        task_id=row[1],
        seq=row[2],
        attempt=row[3],
        lock_epoch=row[4],
        ok=bool(row[5]),
        body=load(row[6]),
    )
    return reply, row[7] == row[4] and row[10] == "running" and row[11] == row[3]


def reply_event(row: tuple[Any, ...], reply: Reply) -> tuple[str, str]:
    """The event (kind, JSON detail) recording `reply` for the step in `row`."""
    detail: dict[str, JsonValue] = {"seq": reply.seq, "agent": row[12], "attempt": reply.attempt}
    if reply.ok:
        return EventKind.STEP_COMPLETED, dumps_detail(detail)
    # The body as stored (cut to size when it was written), not encoded again.
    return EventKind.STEP_FAILED, dumps_detail(detail, error=row[6])
