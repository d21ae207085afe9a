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

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from shepherd.core.records import Event, JsonValue, Lease, Reply, Request, Task
from shepherd.core.states import ProcessState, StepKind

if TYPE_CHECKING:
    from shepherd.core.breaker import Breaker, BreakerEvent, BreakerPolicy
    from shepherd.core.breaker import Decision as BreakerDecision
    from shepherd.core.retention import Tombstone
    from shepherd.core.supervision import Decision, Escalate, Reset
    from shepherd.core.workers import Worker
    from shepherd.store.signals import Signals


#: Seconds past a step's complete_by that its task's claim still holds: time for a
#: reply written at the deadline to be recorded. The scheduler waits as long.
REPLY_GRACE = 0.5

#: Seconds a worker row stays after its process stopped or went silent.
WORKER_RETENTION = 86400.0


@dataclass(frozen=True, slots=True, kw_only=True)
class NewTask:
    """What `submit_task` inserts."""

    workflow: str
    input: JsonValue
    key: str | None = None
    reply_to: str | None = None
    complete_within: float = 30.0


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


@dataclass(frozen=True, slots=True, kw_only=True)
class Submitted:
    """The outcome of `submit_task`."""

    task_id: str
    created: bool


class Store(Protocol):
    """The state store. Roles, the App, the CLI and the dashboard use only this."""

    signals: Signals

    async def open(self) -> None:
        """Connect and apply pending migrations. Raises StoreUnavailableError."""

    async def close(self) -> None:
        """Finish queued writes and release connections."""

    # -- application -------------------------------------------------------
    async def submit_task(self, task: NewTask) -> Submitted:
        """Insert a pending task and its `received` event (idempotent per key)."""

    async def submit_task_in(self, task: NewTask, connection: object) -> Submitted:
        """Like `submit_task`, but inside the caller's open transaction on `connection`.

        The task and its `received` event are written through the caller's
        connection, not the store's, so they commit or roll back together with
        the caller's own rows (and nobody else sees the task before then). A
        `key` already used for the workflow, committed or earlier in the same
        transaction, returns the existing task. Only the PostgreSQL store
        supports it (`connection` is a psycopg 3 `AsyncConnection` on the
        store's database); the others raise `ConfigError`.
        """

    async def get_task(self, task_id: str) -> Task | None:
        """The task with its steps, or None."""

    async def list_tasks(
        self,
        *,
        states: Sequence[ProcessState] = (),
        limit: int = 100,
        workflow: str | None = None,
        key: str | None = None,
        id_prefix: str | None = None,
        updated_since: datetime | None = None,
    ) -> list[Task]:
        """Newest first, without steps: at most `limit` tasks matching every filter given.

        `states` (when not empty), `workflow` and `key` must match; `id_prefix`
        keeps tasks whose id starts with it; `updated_since` those last changed
        at or after it.
        """

    async def count_tasks(self) -> dict[ProcessState, int]:
        """How many tasks are in each state."""

    async def task_events(self, task_id: str) -> list[Event]:
        """The task's history, oldest first."""

    async def read_events(
        self, *, reply_to: str | None, after_id: int, limit: int = 1000
    ) -> list[Event]:
        """Events after `after_id` (for one `reply_to`, or all when None)."""

    # -- scheduler ---------------------------------------------------------
    async def claim_tasks(self, *, owner: str, limit: int) -> list[Task]:
        """Claim up to `limit` claimable tasks for `owner`, with their steps."""

    async def start_step(self, start: StepStart) -> datetime:
        """Mark the step running and enqueue its request; return its complete_by."""

    async def record_replies(self, *, owner: str, limit: int) -> list[tuple[Reply, bool]]:
        """Take up to `limit` replies for tasks `owner` holds and record them.

        A reply for the current epoch and attempt of a running step marks it
        `completed` (or `failed`) and is paired with True; any other reply is
        discarded and paired with False. Every reply taken is removed.
        """

    async def finish_task(self, task_id: str, *, owner: str, epoch: int, result: JsonValue) -> None:
        """Task `processed` with its result."""

    async def fail_task(
        self,
        task_id: str,
        *,
        owner: str,
        epoch: int,
        state: ProcessState,
        error: JsonValue,
    ) -> None:
        """Task ends `error`, `compensated` or `cancelled`, with the reason."""

    async def start_compensation(
        self, task_id: str, *, owner: str, epoch: int, error: JsonValue
    ) -> None:
        """The owner moves the task to `compensating`, keeping its claim."""

    async def release_tasks(self, task_ids: Sequence[str], *, owner: str) -> int:
        """Give claimed tasks back (graceful shutdown): unowned, epoch bumped."""

    # -- agent -------------------------------------------------------------
    async def take_requests(
        self, *, agents: Sequence[str], worker: str, limit: int, suspects: int = 0
    ) -> list[Request]:
        """Lease up to `limit` visible, unexpired requests for these agents.

        At most `suspects` of them (and never more than `limit` in all) may be
        requests of suspect tasks (tasks that crashed a process before); the
        others are not.
        """

    async def reply_and_ack(
        self, request: Request, *, worker: str, ok: bool, body: JsonValue
    ) -> bool:
        """Write the reply and remove the request; False if it was superseded."""

    async def note(self, task_id: str, kind: str, detail: JsonValue) -> None:
        """Append an event to a task's history (an agent that timed out or gave up)."""

    # -- agent: circuit breakers -------------------------------------------
    async def breaker_allow(
        self, service: str, policy: BreakerPolicy
    ) -> tuple[Breaker, BreakerDecision]:
        """May a call to `service` be made now? `core.breaker.allow` on the stored breaker.

        A missing breaker is closed. A `Probe` (open -> half-open) is written
        before this returns, so concurrent callers in any process see it and
        get `Wait`. Returns the breaker after the decision, and the decision.
        """

    async def breaker_report(
        self, service: str, policy: BreakerPolicy, *, failed: bool
    ) -> tuple[Breaker, Breaker]:
        """Count a call's outcome (`record_failure` or `record_success`).

        Returns the breaker just before this report and just after it, so the
        caller can tell which change it made (another process may have changed
        the breaker since the caller last looked).
        """

    async def get_breaker(self, service: str) -> Breaker | None:
        """The stored breaker of `service`, or None if it was never used."""

    async def list_breakers(self) -> list[Breaker]:
        """Every stored breaker, by service name."""

    async def breaker_events(
        self, *, service: str | None = None, limit: int = 50
    ) -> list[BreakerEvent]:
        """The latest breaker state changes (of one service, or all), newest first."""

    # -- agent: heartbeats and done keys -----------------------------------
    async def extend_step(self, request: Request, *, worker: str) -> datetime | None:
        """A heartbeat: move the running step's deadlines one window (`request.within`) ahead.

        Fenced: only while the request row still exists, taken by `worker` and
        not past its complete_by, its step is `running` with the request's
        attempt, and the task is claimed at the request's `lock_epoch`. Then the
        step's complete_by, the request's complete_by and visible_at become now +
        `within` (store clock) and the task's complete_by at least that plus
        REPLY_GRACE. Returns the new complete_by, or None when the execution was
        superseded (or the request has no window), in which case nothing changes.
        """

    async def begin_once(self, key: str, *, holder: str) -> tuple[str, JsonValue]:
        """Mark `key` started by `holder`, unless it is already marked.

        Returns ("new", None) after inserting a `started` mark (committed when
        this returns, so before the caller runs its effect); ("done", result)
        when a result was recorded for `key`; ("started", None) when an
        execution marked `key` and never recorded nor abandoned it.
        """

    async def finish_once(self, key: str, *, holder: str, result: JsonValue) -> bool:
        """Record `result` on `holder`'s started mark of `key` (it becomes `done`).

        Raises PayloadError (changing nothing) if `result` is not acceptable JSON.
        False if there is no started mark of `holder` for `key` any more.
        """

    async def abandon_once(self, key: str, *, holder: str) -> bool:
        """Delete `holder`'s started mark of `key` (its effect did not happen).

        Never deletes a `done` mark nor another holder's. False if there was none.
        """

    # -- supervisor --------------------------------------------------------
    async def acquire_lease(self, name: str, *, holder: str, ttl: float) -> Lease | None:
        """Take or renew a lease; None while someone else holds it."""

    async def release_lease(self, name: str, *, holder: str) -> None:
        """Give the lease up (graceful shutdown)."""

    async def expired_claims(self, *, limit: int) -> list[Task]:
        """Owned tasks whose complete_by has passed (store clock)."""

    async def apply_supervision(self, task: Task, decision: Decision, *, leader: Lease) -> bool:
        """Apply a supervisor decision, fenced by task epoch and leadership."""

    # -- worker registry ---------------------------------------------------
    async def register_worker(
        self,
        instance: str,
        *,
        host: str,
        pid: int,
        roles: Sequence[str],
        agents: Sequence[str],
    ) -> Worker:
        """Insert or replace the row of process `instance`: started and beaten now.

        A replaced row is not stopped any more. In the same transaction, rows
        stopped, or not beaten, for more than WORKER_RETENTION are deleted.
        Returns the row as written.
        """

    async def beat_worker(self, instance: str) -> bool:
        """A heartbeat: the row's `beat_at` becomes now.

        False, changing nothing, if the row is gone or marked stopped: the
        caller registers again.
        """

    async def stop_worker(self, instance: str) -> None:
        """Mark the row stopped now (a graceful stop); a stopped row stays stopped."""

    async def list_workers(self, *, since: datetime | None = None) -> list[Worker]:
        """Workers last heard from (beat or stop) at or after `since` (all when None).

        Live workers beat every few seconds, so a `since` older than the ttl
        lists all of them, plus those that stopped or fell silent after it.
        Newest started first.
        """

    async def dead_workers(self, instances: Sequence[str], *, ttl: float) -> set[str]:
        """The instances among `instances` whose processes are not alive.

        That is, those stopped, without a row, or whose last beat is `ttl`
        seconds old or older on the store's clock.
        """

    # -- supervisor: crash attribution --------------------------------------
    async def unreaped_workers(self) -> list[Worker]:
        """Processes neither stopped nor attributed yet: the live, and the newly dead."""

    async def crash_victims(
        self, instance: str, *, beat_at: datetime
    ) -> list[tuple[Task, bool, int | None]]:
        """The tasks a dead process held: (task, owned, running).

        Tasks in a supervised state whose claim `instance`'s scheduler owns
        (`owned`), or one of whose requests `instance`'s agent had taken with a
        complete_by after `beat_at`, its last beat (`running`: the seq of that
        step, executing in that process when it died; None if none was).
        """

    async def mark_died(self, instance: str) -> bool:
        """A process found gone on its host: dead from now (False if stopped or marked)."""

    async def reap_worker(self, instance: str) -> None:
        """Record that a dead process's crash has been attributed (it is not looked at again)."""

    async def apply_crash(self, task: Task, decision: Reset | Escalate, *, leader: Lease) -> bool:
        """Apply a crash verdict (`core.supervision.on_crash`), fenced like `apply_supervision`.

        Records the task's crashes and owner deaths, releases the claim (a new
        `lock_epoch`) and drops its requests. Never changes `failure_count`.
        """

    # -- retention ---------------------------------------------------------
    async def purge_tasks(self, *, ended_before: datetime, limit: int) -> int:
        """Delete up to `limit` ended tasks last changed before `ended_before`; return how many.

        Only `processed`, `compensated` and `cancelled` tasks go, each with its
        steps, events, requests, replies and done keys; a keyed one leaves a
        tombstone. One short transaction; oldest first.
        """

    async def purge_tombstones(self, *, purged_before: datetime, limit: int) -> int:
        """Delete up to `limit` tombstones written before `purged_before`; return how many."""

    async def get_tombstone(self, task_id: str) -> Tombstone | None:
        """The tombstone of a purged task, or None (never purged, or purged without a key)."""

    async def checkpoint(self) -> None:
        """Housekeeping outside any transaction, called about once a minute by one process.

        SQLite copies its write-ahead log into the database file and truncates
        it when no reader holds it, never waiting for one; PostgreSQL does
        nothing (its own checkpointer and autovacuum do this). Never raises for
        a checkpoint that could not run.
        """

    # -- operator ----------------------------------------------------------
    async def retry_task(
        self, task_id: str, *, seq: int | None = None, payload: JsonValue = None
    ) -> Task:
        """An `error` task back to pending from its failed step (or step `seq`)."""

    async def cancel_task(self, task_id: str) -> Task:
        """Ask for compensation of a task that has not ended; it ends `cancelled`."""

    def now(self) -> datetime:
        """The store's clock (the database's, where it has one)."""

    def statistics(self) -> dict[str, float]:
        """Counters for benchmarks: batches, operations, commits."""
