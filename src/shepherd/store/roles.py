"""The store as each role sees it: role-sized slices of the store contract.

Each method of the contract is declared once, here, with its guarantees in
its docstring; `shepherd.store.contract.Store` is every slice together. A
role receives only the slice it calls, so that what a role may do to the
store is read from its constructor, and a unit test drives it with a fake of
a dozen methods rather than a whole backend. The module docstring of
`shepherd.store.contract` states the guarantees that span several methods.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, Unpack

from shepherd.core.calls import NO_STATE, NoState
from shepherd.core.records import (
    CallAnswer,
    CallRequest,
    Event,
    JsonValue,
    Lease,
    QueueDepth,
    Reply,
    Request,
    Task,
)
from shepherd.core.states import ProcessState

if TYPE_CHECKING:
    from shepherd.core.alerts import StoredAlert
    from shepherd.core.breaker import Breaker, BreakerEvent, BreakerPolicy
    from shepherd.core.breaker import Decision as BreakerDecision
    from shepherd.core.ownership import KeyLease, TakenKey
    from shepherd.core.resources import Keep, Partition, Resolution, Resource, Slot, SlotLease
    from shepherd.core.retention import Tombstone
    from shepherd.core.supervision import Decision, Escalate, Reset
    from shepherd.core.workers import Worker
    from shepherd.store.contract import HeldRequest, NewTask, StepStart, Submitted
    from shepherd.store.ops import TaskFilters
    from shepherd.store.signals import Signals
    from shepherd.store.watch import StoreWatch

__all__ = [
    "AgentStore",
    "ApplicationStore",
    "CallStore",
    "Clocked",
    "OperatorStore",
    "OwnerStore",
    "RegistryStore",
    "ResolverStore",
    "ResourceStore",
    "RetentionStore",
    "SchedulerStore",
    "Signalled",
    "SupervisorStore",
    "TaskHistory",
    "TaskLookup",
]


class Clocked(Protocol):
    """The store's clock."""

    def now(self) -> datetime:
        """The store's clock (the database's, where it has one)."""

    @property
    def watch(self) -> StoreWatch:
        """Since when this process's role loops have been failing to reach the store."""


class Signalled(Protocol):
    """Roles that wait on the store's wake-ups."""

    @property
    def signals(self) -> Signals:
        """Local wake-ups, rung after every commit that touched a channel."""
        ...


class TaskLookup(Protocol):
    """Reading one task."""

    async def get_task(self, task_id: str) -> Task | None:
        """The task with its steps, or None."""


class TaskHistory(Protocol):
    """Reading one task's history."""

    async def task_events(self, task_id: str) -> list[Event]:
        """The task's history, oldest first."""


class SchedulerStore(Signalled, Clocked, TaskLookup, Protocol):
    """What the scheduler (and its workflows' `ctx.call`) does to the store."""

    async def claim_tasks(self, *, owner: str, limit: int) -> list[Task]:
        """Claim up to `limit` claimable tasks for `owner`, with their steps."""

    async def next_due(self) -> datetime | None:
        """The earliest `not_before` of the unclaimed tasks waiting to run, or None.

        No wake-up rings when a task's `not_before` passes: an idle scheduler
        looks again by then.
        """

    async def start_step(self, start: StepStart) -> datetime:
        """Mark the step running and enqueue its request; return its complete_by."""

    async def start_step_taken(self, start: StepStart, *, worker: str) -> Request:
        """As `start_step`, its request leased to `worker` as it is queued; return it.

        For the agent worker of the scheduler's own process: the request is
        hidden until its complete_by, exactly as if `worker` had taken it with
        `take_requests`, and no other worker is woken for it.
        """

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


class AgentStore(Signalled, Clocked, Protocol):
    """What an agent worker (its requests, heartbeats, done keys and breakers) does."""

    async def take_requests(
        self, *, agents: Sequence[str], worker: str, limit: int, suspects: int = 0
    ) -> list[Request]:
        """Lease up to `limit` visible, unexpired requests for these agents.

        At most `suspects` of them (and never more than `limit` in all) may be
        requests of suspect tasks (tasks that crashed a process before); the
        others are not.
        """

    async def reply_and_ack(
        self,
        request: Request,
        *,
        worker: str,
        ok: bool,
        body: JsonValue,
        slot: Slot | None = None,
        recorder: str | None = None,
        trace: str | None = None,
    ) -> bool | Reply:
        """Write the reply and remove the request; False if it was superseded.

        `slot`, a capacity slot the handling held, is released in the same
        transaction (whether the reply counted or not), and `signals.SLOTS` rings.
        With `recorder`, the owner name of the scheduler in the worker's own
        process: if that scheduler holds the task, the reply is recorded on its
        step in this transaction, as `record_replies` would (same checks), and
        returned for the worker to hand over; it is never queued. `trace`, the
        answering step span's context, is kept with the reply (`Reply.trace`).
        """

    async def acquire_slots(
        self, resource: str, holders: Sequence[str], *, worker: str, lease: float
    ) -> tuple[list[str], int | None]:
        """Take units of `resource`'s capacity for as many `holders` as are free, in order.

        Returns (the holders granted, capacity). A slot is a lease: it lasts
        `lease` seconds (store clock) unless renewed. A holder that holds an
        unexpired slot already keeps it (renewed); the others are granted in
        order while fewer than `capacity` unexpired slots are held, so at most
        `capacity` are held at any moment across every process. A resource
        without a capacity grants every holder without holding anything:
        (all of them, None).

        Raises:
            UnknownResourceError: There is no resource of that name.
        """

    async def renew_slots(self, *, worker: str, lease: float) -> list[Slot]:
        """Move every unexpired slot held by `worker` `lease` seconds ahead.

        Returns the slots renewed: a slot of `worker` missing from it expired
        (another holder may have it now).
        """

    async def release_slots(self, slots: Sequence[Slot]) -> int:
        """Give slots back (rings `signals.SLOTS`); returns how many were still held."""

    async def take_tokens(self, resource: str, *, want: int) -> tuple[int, float | None, float]:
        """Take up to `want` tokens of `resource`'s bucket, shared by every process.

        Returns (granted, rate, wait): the bucket (`shepherd.core.rates`) holds
        at most one second's worth of tokens and gains `rate` a second; takes
        from every process take turns on it. `wait` is the seconds until the
        next token when fewer than `want` were granted. A resource without a
        rate grants everything and stores nothing: (want, None, 0.0).

        Raises:
            UnknownResourceError: There is no resource of that name.
        """

    async def note(self, task_id: str, kind: str, detail: JsonValue) -> None:
        """Append an event to a task's history (an agent that timed out or gave up)."""

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


class RetentionStore(Protocol):
    """What a retention pass (`shepherd.supervisor.retention.purge`) deletes with."""

    async def purge_tasks(self, *, ended_before: datetime, limit: int) -> int:
        """Delete up to `limit` ended tasks last changed before `ended_before`; return how many.

        Only `processed`, `compensated` and `cancelled` tasks go, each with its
        steps, events, requests, replies and done keys; a keyed one leaves a
        tombstone. One short transaction; oldest first.
        """

    async def purge_tombstones(self, *, purged_before: datetime, limit: int) -> int:
        """Delete up to `limit` tombstones written before `purged_before`; return how many."""

    async def purge_calls(self, *, limit: int) -> int:
        """Delete up to `limit` calls (`app.call`) whose expiry has passed, answered or not.

        A call expires a minute after its caller stopped waiting: its row, and
        an answer nobody will read, go. Returns how many.
        """


class SupervisorStore(RetentionStore, Clocked, TaskHistory, Protocol):
    """What the supervisor (leadership, expired claims, crashes, retention) does."""

    async def acquire_lease(self, name: str, *, holder: str, ttl: float) -> Lease | None:
        """Take or renew a lease; None while someone else holds it."""

    async def release_lease(self, name: str, *, holder: str) -> None:
        """Give the lease up (graceful shutdown)."""

    async def expired_claims(self, *, limit: int) -> list[Task]:
        """Owned tasks whose complete_by has passed (store clock)."""

    async def apply_supervision(self, task: Task, decision: Decision, *, leader: Lease) -> bool:
        """Apply a supervisor decision, fenced by task epoch and leadership."""

    async def dead_workers(self, instances: Sequence[str], *, ttl: float) -> set[str]:
        """The instances among `instances` whose processes are not alive.

        That is, those stopped, without a row, or whose last beat is `ttl`
        seconds old or older on the store's clock.
        """

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

    async def held_requests(self, task_ids: Sequence[str]) -> list[HeldRequest]:
        """The unanswered requests of `task_ids`, queued or taken: who holds their steps."""

    async def mark_died(self, instance: str) -> bool:
        """A process found gone on its host: dead from now (False if stopped or marked)."""

    async def reap_worker(self, instance: str) -> None:
        """Record that a dead process's crash has been attributed (it is not looked at again)."""

    async def apply_crash(self, task: Task, decision: Reset | Escalate, *, leader: Lease) -> bool:
        """Apply a crash verdict (`core.supervision.on_crash`), fenced like `apply_supervision`.

        Records the task's crashes and owner deaths, releases the claim (a new
        `lock_epoch`) and drops its requests. Never changes `failure_count`.
        """

    async def checkpoint(self) -> None:
        """Housekeeping outside any transaction, called about once a minute by one process.

        SQLite copies its write-ahead log into the database file and truncates
        it when no reader holds it, never waiting for one; PostgreSQL does
        nothing (its own checkpointer and autovacuum do this). Never raises for
        a checkpoint that could not run.
        """


class RegistryStore(Clocked, Protocol):
    """What the worker registry loop does: this process's row, beaten until it stops."""

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


class OperatorStore(RetentionStore, Clocked, TaskLookup, TaskHistory, Protocol):
    """What an operator's tools read and do: look tasks up, retry, cancel, purge, alerts.

    The App's operator API (`get_task`, `list_tasks`, `history`, `retry`,
    `cancel`, `alerts`, `acknowledge_alert`) and the CLI's `show`, `tasks`,
    `workers`, `breakers`, `purge` and `alerts`."""

    async def get_tombstone(self, task_id: str) -> Tombstone | None:
        """The tombstone of a purged task, or None (never purged, or purged without a key)."""

    async def list_tasks(self, *, limit: int = 100, **filters: Unpack[TaskFilters]) -> list[Task]:
        """Newest first by (created_at, id), without steps: at most `limit` tasks matching every filter.

        `states` (when not empty), `workflow` and `key` must match; `id_prefix`
        keeps tasks whose id starts with it; `updated_since` those last changed
        at or after it; `created_from` and `created_to` those created in
        [created_from, created_to); `before` (a `TaskCursor`) those after that
        task in this order: the next page (keyset pagination). Every filter is
        served by an index in this order (`shepherd.store.task_filters`).

        Raises:
            ConfigError: A filter is of the wrong type, a text filter holds a
                NUL, or a time has no time zone; nothing is read.
        """

    async def count_tasks(self) -> dict[ProcessState, int]:
        """How many tasks are in each state."""

    async def count_workflow_tasks(self, workflow: str) -> dict[ProcessState, int]:
        """How many tasks of `workflow` are in each state (states without tasks are absent)."""

    async def count_tasks_in(self, states: Sequence[ProcessState]) -> dict[ProcessState, int]:
        """How many tasks are in each of `states` (states without tasks are absent).

        Reads the index range of those states only: cheap for the states a
        task passes through or waits in (`pending`, `processing`,
        `compensating`, `error`), whatever the number of ended tasks.
        """

    async def queue_depths(self) -> list[QueueDepth]:
        """Per agent, by name: its requests and calls waiting to be taken, and taken now.

        Only agents with something in either queue are listed. A request or a
        call counts as taken while its handling's window runs; past it (a
        handling that died), it is in neither count until the supervisor or
        the next handling moves it. Reads only the rows in flight.
        """

    async def retry_task(
        self,
        task_id: str,
        *,
        seq: int | None = None,
        payload: JsonValue = None,
        by: str | None = None,
    ) -> Task:
        """An `error` task back to pending from its failed step (or step `seq`).

        `by`, who retries it, is recorded in the `retried` event's detail.
        """

    async def cancel_task(self, task_id: str, *, by: str | None = None) -> Task:
        """Ask for compensation of a task that has not ended; it ends `cancelled`.

        `by`, who cancels it, is recorded in the `cancel_requested` event's detail.
        """

    async def list_workers(self, *, since: datetime | None = None) -> list[Worker]:
        """Workers last heard from (beat or stop) at or after `since` (all when None).

        Live workers beat every few seconds, so a `since` older than the ttl
        lists all of them, plus those that stopped or fell silent after it.
        Newest started first.
        """

    async def list_breakers(self) -> list[Breaker]:
        """Every stored breaker, by service name."""

    async def breaker_events(
        self, *, service: str | None = None, limit: int = 50
    ) -> list[BreakerEvent]:
        """The latest breaker state changes (of one service, or all), newest first."""

    async def list_alerts(
        self, *, open_only: bool = False, limit: int = 100, task_id: str | None = None
    ) -> list[StoredAlert]:
        """At most `limit` stored alerts (only those not acknowledged, if `open_only`; only
        those of `task_id`, if given), newest first.

        An alert is stored by the write that moves its task into `error` (a
        supervisor's escalation, a crash verdict's quarantine, an owner's
        failure into `error`), in that write's transaction, and only when the
        write took place: a fenced-off write stores none. Its `reason` and
        `failure_count` are those the alert sinks are sent.

        Raises:
            ConfigError: `limit` is not a whole number of at least 1.
        """

    async def acknowledge_alert(self, alert_id: int, *, by: str) -> StoredAlert:
        """Acknowledge an alert (now, store clock, by `by`); the alert as stored.

        An alert acknowledged already keeps its first acknowledgement, which
        is returned. Bad input changes nothing.

        Raises:
            UnknownAlertError: No alert has that id.
            ConfigError: `by` is empty (or not a str, too long, or holds a
                control character), or `alert_id` is not a whole number.
        """


class ApplicationStore(Signalled, Protocol):
    """What the App itself does: open and close the store, submit, and follow events."""

    async def open(self) -> None:
        """Connect and apply pending migrations. Raises StoreUnavailableError."""

    async def close(self) -> None:
        """Finish queued writes and release connections."""

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

    async def submit_tasks(self, tasks: Sequence[NewTask]) -> list[Submitted]:
        """Insert pending tasks and their `received` events in ONE transaction: all or none.

        One outcome per task, in order, as `submit_task` gives it; a key
        repeated within `tasks` (same workflow) gives the first one's task to
        each (`created` only for the first). Every input is encoded before
        anything is written: one refused (`PayloadError`, its message starting
        `submissions[i]:`) writes none of them. Roles are woken once.
        """

    async def submit_tasks_in(
        self, tasks: Sequence[NewTask], connection: object
    ) -> list[Submitted]:
        """`submit_tasks` inside the caller's open transaction, as `submit_task_in` does one.

        Every input is encoded before any statement is sent; the statements
        run in one savepoint, so a failure leaves the caller's transaction
        usable and none of the tasks written.
        """

    async def read_events(
        self, *, reply_to: str | None, after_id: int, limit: int = 1000
    ) -> list[Event]:
        """Events after `after_id` (for one `reply_to`, or all when None)."""

    def statistics(self) -> dict[str, float]:
        """Counters for benchmarks: batches, operations, commits."""


class ResolverStore(Signalled, Protocol):
    """What a resolver reads: where an entity lives, the resources, and the mapping's version.

    The mapping (resources, partitions, assignments) is numbered: every write
    that changes it bumps the resolver's version once, in its transaction, and
    rings `signals.RESOLVER` in every process (NOTIFY on PostgreSQL, the
    datagram path on SQLite); a write that changes nothing bumps nothing.
    """

    async def resolve(
        self, entity: str, *, default_partition: str | None = None
    ) -> tuple[Resolution | None, int]:
        """Where `entity` lives, and the version that answer was read at (one statement).

        An entity assigned to no partition resolves to `default_partition` when
        given; None when it has no partition (or the default does not exist).
        Raises InvalidResourceError for a name that cannot be an entity's.
        """

    async def resolver_version(self) -> int:
        """The mapping's version now (0 before any change)."""

    async def list_resources(self) -> list[Resource]:
        """Every resource, by name."""


class OwnerStore(Clocked, Protocol):
    """What the owners of an exclusive agent's keys do: leases with epochs, and owner state.

    A key (the seed's event type) is owned by at most one process at any
    moment. Every lease carries an epoch, bumped whenever the key changes
    hands (or its owner takes it back after letting it expire), so that a
    write carrying an older epoch is recognisably a stale owner's.
    """

    async def take_keys(
        self, agent: str, keys: Sequence[str], *, owner: str, lease: float
    ) -> list[TakenKey]:
        """Take (or renew) keys of an exclusive agent for `owner`, each for `lease` seconds.

        At most one owner holds a key's lease at any moment. A free key (never
        leased, handed back, or its lease expired) is taken with its epoch
        bumped, and comes with the durable owner state its last owner set; a
        key `owner` holds live is renewed with its epoch kept; a key another
        owner holds live is not granted. Returns the keys granted, in order.
        """

    async def renew_keys(self, *, owner: str, lease: float) -> list[KeyLease]:
        """Move every live key lease of `owner` `lease` seconds ahead; returns those renewed.

        A key of `owner` missing from it expired: another owner may hold it now.
        """

    async def release_keys(self, agent: str, keys: Sequence[str], *, owner: str) -> int:
        """Hand keys back (their epoch and state stay); how many `owner` still held."""

    async def set_owner_state(
        self, agent: str, key: str, *, owner: str, epoch: int, state: JsonValue
    ) -> bool:
        """Set a key's durable owner state; False (nothing written) for a stale owner.

        Fenced: only while `owner` holds the key's live lease at `epoch`.

        Raises:
            PayloadError: `state` is not JSON or is too large.
        """

    async def key_backlogs(self, agent: str) -> dict[str, tuple[int, datetime]]:
        """Of each key of `agent` with unanswered calls: how many, and the oldest one's send.

        One read for all of a process's keys: what its owners look at on every
        wake-up, to know whose batch is due.
        """

    async def key_backlog(self, agent: str, key: str) -> tuple[int, datetime | None]:
        """How many unanswered calls one key has, and when the oldest of them was sent."""

    async def waiting_keys(self, agent: str) -> list[str]:
        """The owning keys of `agent`'s unanswered calls, sorted (the keys to share out)."""

    async def take_key_calls(
        self, agent: str, key: str, *, owner: str, epoch: int, limit: int
    ) -> tuple[list[CallRequest], list[CallRequest]]:
        """Take the next `limit` calls of one key for its owner, in the order they were sent.

        Fenced: ([], []) unless `owner` holds the key's live lease at `epoch`.
        A call taken before, by this owner or an earlier one, is taken again
        (its handlings counted); a call out of handlings is answered with an
        error and returned as given up, as `CallStore.take_calls` does. Returns
        (taken, given up).
        """

    async def answer_owned(
        self,
        agent: str,
        key: str,
        *,
        owner: str,
        epoch: int,
        answers: Sequence[tuple[str, int, bool, JsonValue]],
        state: JsonValue | NoState = NO_STATE,
    ) -> bool:
        """Answer calls of one key and set its owner state, in one transaction.

        `answers` are (call_id, attempt, ok, body); each is written where its
        call is unanswered and `attempt` is its latest handling. `state`, unless
        `NO_STATE`, becomes the key's owner state. Fenced: False, and nothing
        written, unless `owner` holds the key's live lease at `epoch`, so a
        stale owner's answers and state never land.

        Raises:
            PayloadError: `state` is not JSON or is too large (nothing written).
        """

    async def answer_and_take(
        self,
        agent: str,
        key: str,
        *,
        owner: str,
        epoch: int,
        answers: Sequence[tuple[str, int, bool, JsonValue]],
        state: JsonValue | NoState = NO_STATE,
        max_items: int,
        max_delay: float,
    ) -> tuple[bool, list[CallRequest], list[CallRequest], tuple[int, datetime | None]]:
        """`answer_owned`, then, in the same transaction, the key's next batch if it is due.

        Due: `max_items` calls wait, or the oldest has waited `max_delay` seconds;
        taken as `take_key_calls` takes. Returns (owned, taken, given up,
        backlog): one commit per flush for a busy key instead of two. The
        backlog is the key's unanswered calls as read before the take (how many,
        and when the oldest was sent; (0, None) for a stale owner), so that an
        owner that took nothing waits for its next batch without reading again.
        """

    async def list_key_leases(self, agent: str) -> list[KeyLease]:
        """The owned keys of `agent`, by key (expired leases too, until taken again)."""


class CallStore(Signalled, Clocked, Protocol):
    """Durable calls from plain code (`app.call`): what callers and agent processes do.

    A call is not a task. It is handled by one agent process at a time; a
    handling that has not answered by its `complete_by` (`within` after it was
    taken) is handed to another, up to `max_attempts` handlings, after which
    the call is answered with an error. A call has exactly one answer: only
    its latest handling may give it.
    """

    async def send_call(
        self,
        call_id: str,
        agent: str,
        payload: JsonValue,
        *,
        within: float,
        max_attempts: int,
        expires_in: float,
        owner_key: str | None = None,
    ) -> None:
        """Store a call (rings `signals.CALLS`); deleted `expires_in` seconds from now.

        A call with an `owner_key` (to an exclusive agent) is taken only by that
        key's owner (`OwnerStore.take_key_calls`), never by `take_calls`.

        Raises:
            PayloadError: `payload` is not JSON or is too large.
        """

    async def take_calls(
        self, *, worker: str, agents: Sequence[str], limit: int
    ) -> tuple[list[CallRequest], list[CallRequest]]:
        """Take up to `limit` waiting calls of `agents` for `worker`, oldest first.

        Returns (taken, given up). A call whose `max_attempts` handlings all
        ended without an answer is not taken again: it is answered with an
        error (`shepherd.core.calls.gave_up_body`) and returned as given up,
        so that the worker can alert an operator.
        """

    async def answer_call(
        self, call_id: str, *, worker: str, attempt: int, ok: bool, body: JsonValue
    ) -> bool:
        """Answer a call (rings `signals.ANSWERS`); False, and nothing written, unless
        `worker`'s handling `attempt` is the call's latest and it is unanswered.

        An error body is cut to the payload limit, never refused; a result that
        is not JSON or too large raises PayloadError.
        """

    async def get_answers(self, call_ids: Sequence[str]) -> dict[str, CallAnswer]:
        """The answers of those of `call_ids` that are answered (and not yet deleted)."""


class ResourceStore(ResolverStore, Protocol):
    """What the App and the operator do to resources, partitions and assignments.

    Every input is checked before anything is written: a bad name, kind,
    info, capacity or rate raises `InvalidResourceError` naming it and changes
    nothing, as do the errors that say what does not exist.
    """

    async def list_slots(self, resource: str | None = None) -> list[SlotLease]:
        """The capacity slots in the store (of `resource`, or all), oldest first.

        An expired slot is listed until the next taker of its resource deletes
        it: compare `expires_at` with the store's now.
        """

    async def declare_resource(self, resource: Resource) -> bool:
        """Insert `resource` if no resource has its name; never overwrite. Whether it did."""

    async def add_resource(self, resource: Resource) -> Resource:
        """Insert `resource`. Raises ResourceExistsError if its name is taken."""

    async def set_resource(
        self,
        name: str,
        *,
        kind: str | Keep = ...,
        info: dict[str, JsonValue] | Keep = ...,
        capacity: int | Keep | None = ...,
        rate: float | Keep | None = ...,
    ) -> Resource:
        """Change the fields given (None clears `capacity` or `rate`); the resource as stored.

        Raises UnknownResourceError if there is no such resource.
        """

    async def remove_resource(self, name: str) -> Resource:
        """Delete a resource no partition lives on; the resource it was.

        Raises UnknownResourceError, or ResourceInUseError naming the partitions.
        """

    async def move_partition(self, partition: str, resource: str) -> tuple[Partition, str | None]:
        """Put `partition` on `resource`, creating the partition if it is new.

        Returns the partition and the resource it was on before (None if new).
        Raises UnknownResourceError if there is no such resource.
        """

    async def assign_entity(self, entity: str, partition: str) -> str | None:
        """Map `entity` to `partition`; the partition it was in before, or None.

        Raises UnknownPartitionError if there is no such partition.
        """

    async def unassign_entity(self, entity: str) -> str | None:
        """Forget `entity`'s partition; the partition it was in, or None if it had none."""

    async def list_partitions(self) -> list[Partition]:
        """Every partition, by name, with its resource and how many entities it holds."""
