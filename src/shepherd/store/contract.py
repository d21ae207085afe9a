"""The store contract: the atomic operations every role uses, and their guarantees.

`Store` is every role's view (`shepherd.store.roles`) together: the methods
of every concept's operations (`shepherd.store.ops`), each declared once with
its guarantee in its docstring, plus the store's life cycle. Every method is
ONE transaction (backends may commit several callers'
operations together — group commit — but never split one). The conformance
suite (tests/contract) checks these guarantees on every backend:

* `submit_task` with a `key` already used for the same workflow creates
  nothing and returns the existing task's id.
* `claim_tasks` gives each claimable task (pending or compensating, unowned,
  `not_before` passed) to at most one holder (`locked_by`), bumping `lock_epoch`.
* Every write by a claim's holder (`start_step`, `record_replies`,
  `finish_task`, `fail_task`, `start_compensation`) carries the holder's
  `lock_epoch` and raises `StaleEpochError` when the task has moved on; it
  then changes nothing.
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

from shepherd.store.ops.alerts import Alerts
from shepherd.store.ops.bulk import Bulk
from shepherd.store.ops.crashes import HeldRequest
from shepherd.store.ops.operators import Operators
from shepherd.store.ops.steps import REPLY_GRACE, StepStart
from shepherd.store.ops.tasks import NewTask, Submitted
from shepherd.store.ops.workers import WORKER_RETENTION
from shepherd.store.roles import (
    AgentStore,
    ApplicationStore,
    CallStore,
    OwnerStore,
    RegistryStore,
    ResolverStore,
    SchedulerStore,
    SupervisorStore,
)

__all__ = [
    "REPLY_GRACE",
    "WORKER_RETENTION",
    "HeldRequest",
    "NewTask",
    "StepStart",
    "Store",
    "Submitted",
]


class Store(
    SchedulerStore,
    AgentStore,
    SupervisorStore,
    RegistryStore,
    ResolverStore,
    OwnerStore,
    CallStore,
    ApplicationStore,
    Alerts,
    Operators,
    Bulk,
):
    """The state store: every role's view (`shepherd.store.roles`) together.

    Roles, the App, the CLI and the dashboard use only this (or a view of
    it). A backend implements it by subclassing `shepherd.store.facade.Facade`.
    """
