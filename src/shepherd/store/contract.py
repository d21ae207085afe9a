"""The store contract: the atomic operations every role uses, and their guarantees.

Every method is ONE transaction (backends may commit several callers'
operations together — group commit — but never split one). The conformance
suite (tests/contract) checks these guarantees on every backend:

* `submit_task` with a `key` already used for the same workflow creates
  nothing and returns the existing task's id.
* `claim_tasks` gives each claimable task (pending or compensating, unowned,
  `not_before` passed) to at most one owner, bumping `lock_epoch`.
* Every owner write (`start_step`, `record_reply`, `finish_task`, `fail_task`,
  `start_compensation`) carries the owner's `lock_epoch` and raises
  `StaleEpochError` when the task has moved on; it then changes nothing.
* A step's state change and the messages and events it causes are written in
  the same transaction (transactional outbox).
* `reply_and_ack` writes the reply and removes the request together; a request
  that was superseded or expired is not replied to.
* `record_replies` records a reply only for the current epoch and attempt of a
  running step, exactly once; other replies are discarded.
* `apply_supervision` is fenced twice: by the task's `lock_epoch` and by the
  supervisor's leadership epoch.
* Payloads are JSON values; the backend never unpickles anything. Every
  JSON value is encoded by `shepherd.payloads`: a payload or a result over the
  limit is refused with `PayloadError`; an error body (`fail_task`,
  `start_compensation`, a reply with `ok=False`, `note`, a supervisor's or
  crash verdict's reason) is cut to the limit and marked `"truncated": true`,
  never refused, so that a task can always fail.
* `extend_step` (a heartbeat) moves a step's deadlines only for the current
  execution (request taken by that worker, step running at that attempt, task
  at that epoch); a superseded execution gets None and changes nothing.
* A done key is marked `started` (committed) before its effect runs; a `done`
  mark is never removed; `retry_task` removes the `started` marks of the steps
  it puts back to work (keys `task_id/seq` and `task_id/seq/...`).
* Crash attribution (`apply_crash`) never changes a task's `failure_count`: a
  process that died is not its tasks' failure. A task's `crashes` only grow;
  a request of a suspect task is marked `suspect`, and `take_requests` gives an
  agent worker at most `suspects` such requests.
* A circuit breaker is one row per service shared by every process:
  `breaker_allow` and `breaker_report` lock it, apply `shepherd.core.breaker`
  on the store's clock and write the result, so only one caller in the whole
  cluster is given a `Probe` per cool-down; every change of state writes a
  breaker event in the same transaction and rings `signals.BREAKERS`.
* The worker registry keeps one row per process instance, timed on the store's
  clock: `register_worker` replaces the instance's row (started and beaten now,
  not stopped) and deletes rows stopped or silent for WORKER_RETENTION;
  `beat_worker` moves only a registered, unstopped row; `dead_workers` names
  every given instance that is stopped, has no row, or whose last beat is `ttl`
  seconds old or older (`shepherd.core.workers.liveness`).
* Retention: `purge_tasks` deletes at most `limit` tasks that ended
  (`processed`, `compensated`, `cancelled`) with `updated_at` before
  `ended_before`, together with their steps, events, requests, replies and
  done keys (`task_id/...`); a task in any other state (`error` included) is
  never touched, whatever its age. Each purged task with a key leaves a
  tombstone in the same transaction; while it exists, `submit_task` of that
  (workflow, key) creates nothing and returns the purged task's id.
  `purge_tombstones` deletes at most `limit` tombstones purged before
  `purged_before`; after that the key makes a new task.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from shepherd.core.records import JsonValue
from shepherd.core.states import StepKind
from shepherd.store.operator_roles import OverviewStore
from shepherd.store.roles import (
    AgentStore,
    ApplicationStore,
    CallStore,
    OperatorStore,
    OwnerStore,
    RegistryStore,
    ResourceStore,
    SchedulerStore,
    SupervisorStore,
)

if TYPE_CHECKING:
    from datetime import datetime

    from shepherd.core.resources import Resolution

#: Seconds past a step's complete_by that its task's claim still holds: time for a
#: reply written at the deadline to be recorded. The scheduler waits as long.
REPLY_GRACE = 0.5

#: Seconds a worker row stays after its process stopped or went silent.
WORKER_RETENTION = 86400.0


@dataclass(frozen=True, slots=True, kw_only=True)
class HeldRequest:
    """A request of a claimed task, queued or taken, as the supervisor weighs an expiry.

    Attributes:
        task_id: Its task.
        seq: Its step.
        lock_epoch: The claim that sent it.
        taken_by: The agent worker leasing it (`<instance>/a`), or None while queued.
        suspect: Its step runs apart from other suspects (`StepStart.suspect`).
        created_at: When it was queued (the store's clock).
        complete_by: When its window ends: a taken request is still running
            until then (a suspect's window starts when it is taken).
    """

    task_id: str
    seq: int
    lock_epoch: int
    taken_by: str | None
    suspect: bool
    created_at: datetime
    complete_by: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class NewTask:
    """What `submit_task` inserts."""

    workflow: str
    input: JsonValue
    key: str | None = None
    reply_to: str | None = None
    complete_within: float = 30.0
    #: The submitter's trace context (`shepherd.tracing`), or None when not traced.
    trace: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class StepStart:
    """What `start_step` writes: the step `running` and its request, fenced by epoch."""

    task_id: str
    owner: str
    epoch: int
    seq: int
    agent: str
    payload: JsonValue
    within: float
    attempt: int
    kind: StepKind = StepKind.FORWARD
    undo: str | None = None
    compensates: int | None = None
    #: A retry policy for this call only (`RetryPolicy.to_json()`), or None.
    retry: JsonValue = None
    #: This step was running at a crash: its request is marked suspect, to run apart
    #: from other suspects.
    suspect: bool = False
    #: Seconds added to the step's first window for waiting in the queue (a suspect
    #: waits for an agent that runs no other suspect; the agent then restarts the
    #: window when it takes the request).
    queue_allowance: float = 0.0
    #: Where the call's entity lives (resolved when the step was first sent, then
    #: the recorded one on every later attempt): written on the step and its request.
    resolution: Resolution | None = None
    #: The trace context of the task run sending it (`shepherd.tracing`), written on
    #: its request, or None when not traced.
    trace: str | None = None
    #: The agent worker of the scheduler's own process that takes the request as it
    #: is queued (`start_step_taken`): leased to it until complete_by, as
    #: `take_requests` would lease it, and never seen by other workers. None queues it.
    taken_by: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Submitted:
    """The outcome of `submit_task`."""

    task_id: str
    created: bool


class Store(
    SchedulerStore,
    AgentStore,
    SupervisorStore,
    RegistryStore,
    OperatorStore,
    ApplicationStore,
    ResourceStore,
    OwnerStore,
    CallStore,
    OverviewStore,
    Protocol,
):
    """The state store: every role's slice (`shepherd.store.roles`) together.

    Roles, the App, the CLI and the dashboard use only this (or a slice of it).
    """
