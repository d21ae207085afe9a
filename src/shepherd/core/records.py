"""Frozen records read from and written to the state store.

Instants are aware UTC datetimes (`*_at`, `*_by`); payloads are JSON values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from shepherd.core.jsonvalue import JsonValue as JsonValue
from shepherd.core.states import ProcessState, StepKind, StepState

if TYPE_CHECKING:
    from shepherd.core.resources import Resolution


def idempotency_key(task_id: str, seq: int) -> str:
    """`task_id/seq`: the key of every execution of one step, given to its handler.

    An undo's payload names the step it undoes by this key too, so that a
    refund can find the charge a service recorded under it.
    """
    return f"{task_id}/{seq}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """One step of a task: a `ctx.call`, or an undo during compensation."""

    task_id: str
    seq: int
    agent: str
    state: StepState
    kind: StepKind = StepKind.FORWARD
    attempt: int = 0
    complete_by: datetime | None = None
    request: JsonValue = None
    result: JsonValue = None
    error: JsonValue = None
    undo: str | None = None
    #: For an undo step, the seq of the forward step it compensates.
    compensates: int | None = None
    #: Where the call's entity lived when the step was first sent (None: no entity).
    #: A retried or recovered step is sent with this one, never resolved again.
    resolution: Resolution | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Task:
    """The seed's task record."""

    id: str
    workflow: str
    key: str | None
    input: JsonValue
    process_state: ProcessState
    locked_by: str | None
    lock_epoch: int
    complete_by: datetime | None
    failure_count: int
    not_before: datetime
    reply_to: str | None
    created_at: datetime
    updated_at: datetime
    result: JsonValue = None
    error: JsonValue = None
    cancel_requested: bool = False
    steps: tuple[Step, ...] = field(default=())
    #: The processes (instances) that died while one of this task's steps ran in them.
    crashes: tuple[str, ...] = ()
    #: How often the process owning this task's claim died.
    owner_deaths: int = 0
    #: The submitter's trace context (`shepherd.tracing`), or None when not traced.
    trace: str | None = None
    #: When the supervisor cancels the task if it has not ended (`core.timing`), or None.
    deadline: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """A message on an agent's request queue."""

    id: int
    agent: str
    task_id: str
    seq: int
    attempt: int
    lock_epoch: int
    payload: JsonValue
    complete_by: datetime
    kind: StepKind = StepKind.FORWARD
    #: The step's window in seconds: how far a heartbeat moves `complete_by`.
    within: float | None = None
    #: A retry policy for this call only (`RetryPolicy.to_json()`), or None for the agent's.
    retry: JsonValue = None
    #: Its task crashed a worker process before: run it apart from other suspects.
    suspect: bool = False
    #: The step's recorded resolution (its entity's partition and resource), or None.
    resolution: Resolution | None = None
    #: When it was queued (the store's clock): it is visible to agents from then on.
    created_at: datetime | None = None
    #: The trace context of the scheduler's task run that sent it, or None.
    trace: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CallRequest:
    """A durable call from plain code (`app.call`), as an agent process took it.

    Not a task: it has no workflow and no steps. `attempt` counts the handlings
    started (1 on the first); a handling that does not answer by `complete_by`
    is taken again by any process, up to the call's `max_attempts`.
    """

    call_id: str
    agent: str
    payload: JsonValue
    attempt: int
    max_attempts: int
    #: Seconds one handling may take before the call is handed to another.
    within: float
    complete_by: datetime
    #: The owning key of a call to an exclusive agent, or None.
    owner_key: str | None = None
    #: Where the call's entity lived when it was sent (`app.call(..., entity=)`), or None.
    resolution: Resolution | None = None
    #: The name of the reminder this call stands for (`app.remind`), and its tick; else None.
    reminder: str | None = None
    reminder_at: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CallAnswer:
    """A call's one answer: its result (`ok`) or its error body."""

    ok: bool
    body: JsonValue


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """A message on the reply queue: an agent's answer to one request."""

    id: int
    task_id: str
    seq: int
    attempt: int
    lock_epoch: int
    ok: bool
    body: JsonValue
    #: The trace context of the agent's step span that answered, or None.
    trace: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """One entry of the append-only event log."""

    id: int
    task_id: str
    key: str | None
    reply_to: str | None
    kind: str
    detail: JsonValue
    at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class Lease:
    """A named lease (supervisor leadership): who holds it, with which epoch, until when."""

    name: str
    holder: str
    epoch: int
    expires_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueDepth:
    """How much waits for one agent now: its requests (steps) and its calls (`app.call`).

    `*_waiting` are not taken yet; `*_taken` are in a handling whose window
    has not passed. Requests and calls past their window are in neither.
    """

    agent: str
    requests_waiting: int = 0
    requests_taken: int = 0
    calls_waiting: int = 0
    calls_taken: int = 0
