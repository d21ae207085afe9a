"""App: registers workflows and agents; submits tasks; runs the roles.

An App owns its registry, its store, its clock and its alert sinks. It opens
lazily on first use, or explicitly with `async with App(...) as app`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, TypeVar, final

from shepherd import tracing
from shepherd.agents import Agent, AgentWorker, Handler
from shepherd.agents.batch import Batch
from shepherd.agents.calls import CallServer
from shepherd.agents.owners import OwnerServer
from shepherd.agents.pools import check_pool
from shepherd.agents.threads import check_handler
from shepherd.alerts import Alert, AlertSink, send_all, sink_from_spec
from shepherd.calling import Caller
from shepherd.clock import Clock, SystemClock
from shepherd.collector import raised_threshold
from shepherd.config import Settings
from shepherd.core.alerts import StoredAlert
from shepherd.core.breaker import Breaker, BreakerPolicy
from shepherd.core.calls import owner_key_of
from shepherd.core.overview import Operator, ThroughputBucket, bucket_starts, fill
from shepherd.core.records import CallRequest, Event, JsonValue, Lease, Task
from shepherd.core.resources import Resource, check_name
from shepherd.core.retry import RetryPolicy
from shepherd.core.states import ProcessState
from shepherd.core.supervision import BackoffPolicy, SupervisionPolicy
from shepherd.core.workers import Worker
from shepherd.errors import (
    CommitUnknownError,
    ConfigError,
    IncompleteAppError,
    InvalidResourceError,
    OwnerKeyError,
    TaskFailedError,
    UnknownAgentError,
    UnknownTaskError,
)
from shepherd.governance.resolver import Resolver, StaticResolver, StoreResolver
from shepherd.metrics import Metrics
from shepherd.registry import WorkerRegistry
from shepherd.running import run_roles
from shepherd.scheduler import Scheduler, Workflow
from shepherd.scheduler.wiring import declared_agents, describe, missing_agents
from shepherd.store import open_store
from shepherd.store import signals as ch
from shepherd.store.cursor import TaskCursor
from shepherd.store.operator_rows import checked_buckets
from shepherd.store.resource_rows import checked_resource
from shepherd.store.signals import Signals
from shepherd.submission import Submission, commit_unknown, new_task, new_tasks
from shepherd.supervisor import Supervisor
from shepherd.supervisor.supervisor import LEASE
from shepherd.watchdog import Watchdog

if TYPE_CHECKING:
    from shepherd.store.contract import NewTask, Store

log = logging.getLogger("shepherd")

F = TypeVar("F", bound=Callable[..., Any])
ROLES = ("scheduler", "agent", "supervisor")


def instance_id() -> str:
    """A name for this process's role instances: host, pid and a random suffix."""
    return f"{socket.gethostname()}:{os.getpid()}:{os.urandom(2).hex()}"


@final
class App:
    """A shepherd application."""

    def __init__(
        self,
        store: str | None = None,
        *,
        alerts: Iterable[str | AlertSink | Callable[[Alert], object]] = ("log",),
        clock: Clock | None = None,
        resolver: Resolver | None = None,
        **settings: Any,
    ) -> None:
        """Create an app; nothing is opened until first use.

        Args:
            store: The store URL (`sqlite:///shepherd.db` by default, or
                `postgresql://...`); `SHEPHERD_STORE` when omitted.
            alerts: Where operator alerts go: "log", webhook URLs, callables.
            clock: The clock (tests pass a fake one).
            resolver: Where entities live (`app.resolver`): a `StoreResolver` (the
                default: the mapping in the store) or a `StaticResolver(fn)`.
            **settings: Any field of `Settings`; `SHEPHERD_*` variables otherwise.

        Raises:
            ConfigError: A setting or alert sink is invalid.
        """
        if store is not None:
            settings["store"] = store
        self.settings = Settings.from_env(**settings)
        self.clock: Clock = clock or SystemClock()
        self.sinks: list[AlertSink] = [sink_from_spec(s) for s in alerts]
        self.workflows: dict[str, Workflow] = {}
        self.agents: dict[str, Agent] = {}
        #: Counters of this process (calls, retries, timeouts, breaker changes).
        self.metrics = Metrics()
        self._store: Store | None = None
        self._opened = False
        self._open_lock: asyncio.Lock | None = None
        self._alerts: set[asyncio.Task[None]] = set()
        self._caller: Caller | None = None
        #: Async callables run once by the next `close`, last added first (then forgotten);
        #: helpers such as `shepherd.agents.http` close what they opened for this app here.
        self.on_close: list[Callable[[], Awaitable[object]]] = []
        self.instance = instance_id()
        #: Watches the event loop while `run` runs: blocks longer than `block_warning`.
        self.watchdog = Watchdog(
            threshold=self.settings.block_warning, on_block=self.metrics.loop_blocks.inc
        )
        #: Resources declared with `resource`, created in the store when the app opens.
        self.resources: dict[str, Resource] = {}
        self._resolver: Resolver = StoreResolver() if resolver is None else resolver
        if isinstance(self._resolver, StoreResolver | StaticResolver):
            self._resolver.bind(self)

    # -- registration ------------------------------------------------------
    def workflow(
        self,
        name: str | None = None,
        *,
        complete_within: float | None = None,
        max_failures: int = 3,
        on_exhausted: Literal["error", "compensate"] = "error",
        backoff: BackoffPolicy | None = None,
        agents: Iterable[str] = (),
    ) -> Callable[[F], F]:
        """Register `async def flow(ctx, data)` as a workflow.

        Args:
            name: The workflow's name (default: the function's name).
            complete_within: Seconds a claim may go without progress before the
                supervisor deems it failed.
            max_failures: Expirations tolerated before `on_exhausted` applies.
            on_exhausted: "error" (operator alert) or "compensate" (undo).
            backoff: The wait before a reset task may be claimed again.
            agents: Agents the workflow calls under names computed at run time
                (`ctx.call(name, ...)`); like those it names as literals, they must
                be registered before a scheduler starts (see `check`).

        Raises:
            ConfigError: An option is invalid.
        """
        declared = declared_agents(agents)
        if on_exhausted not in ("error", "compensate"):
            raise ConfigError(
                "on_exhausted", f"must be 'error' or 'compensate', not {on_exhausted!r}"
            )
        try:
            policy = SupervisionPolicy(
                max_failures=max_failures,
                on_exhausted=on_exhausted,
                backoff=backoff or BackoffPolicy(),
            )
        except ValueError as exc:
            raise ConfigError("workflow", str(exc)) from None
        within = (
            self.settings.default_complete_within if complete_within is None else complete_within
        )
        if within <= 0:
            raise ConfigError("complete_within", "must be a positive number of seconds")

        def register(fn: F) -> F:
            wf_name = name or fn.__name__
            self.workflows[wf_name] = Workflow(
                name=wf_name,
                fn=fn,
                complete_within=float(within),
                policy=policy,
                agents=declared,
            )
            return fn

        return register

    def agent(
        self,
        name: str | None = None,
        *,
        retry: RetryPolicy | None = None,
        within: float | None = None,
        breaker: BreakerPolicy | None = None,
        service: str | None = None,
        threads: bool = False,
        resource: str | None = None,
        exclusive_by: str | Callable[[JsonValue], object] | None = None,
        batch: Batch | None = None,
    ) -> Callable[[F], F]:
        """Register `async def handler(request)` as an agent (or a plain `def`, with `threads`).

        Args:
            name: The agent's name (default: the function's name).
            retry: How transient failures are retried inside `complete_by`.
            within: Default seconds a call to this agent may take.
            breaker: A circuit breaker for the remote service, shared through the
                store by every process (default: none).
            service: The remote service's name (default: the agent's name); agents
                that name the same service share its breaker.
            threads: The handler is a plain, blocking `def`, run in a thread (at most
                `agent_threads` at once per worker) so that it does not block the
                event loop. At complete_by the step is given up, but the thread runs
                on and keeps its slot until it returns. It cannot call
                `request.heartbeat()` or `request.once()`.
            resource: The constrained resource the handler uses: while it runs it
                holds one of the resource's `capacity` slots, shared by every
                process (default: the resource of the step's resolution, when the
                step was called with an `entity`; none without one).
            exclusive_by: Makes the agent exclusive: each call (`call`) has an
                owning key, this payload field's value or this function of the
                payload (evaluated by the caller), and at any moment one process
                owns a key and handles its calls one at a time, in the order
                sent (see docs/howto/calls.md).
            batch: For an exclusive agent: gather a key's waiting calls into one
                handling, `Batch(max_items=..., max_delay=...)`. The handler then
                takes a list of requests and returns a list of as many results;
                their answers are committed in one transaction.

        Raises:
            ConfigError: An option is invalid, or the handler is an `async def` with
                `threads=True`, or a plain `def` without it.
        """
        if within is not None and within <= 0:
            raise ConfigError("within", "must be a positive number of seconds")
        if service is not None and not service:
            raise ConfigError("service", "must be a non-empty name")
        if resource is not None and (problem := check_name("resource", resource)) is not None:
            raise ConfigError("resource", problem)
        if exclusive_by is not None and not (
            (isinstance(exclusive_by, str) and exclusive_by) or callable(exclusive_by)
        ):
            raise ConfigError(
                "exclusive_by", "must be a payload field name or a function of the payload"
            )
        if batch is not None and not isinstance(batch, Batch):
            raise ConfigError(
                "batch", f"must be a Batch(max_items=..., max_delay=...), not {batch!r}"
            )
        if batch is not None and exclusive_by is None:
            raise ConfigError(
                "batch", "only an exclusive agent (exclusive_by=...) can batch its calls"
            )

        def register(fn: F) -> F:
            agent_name = name or fn.__name__
            check_handler(agent_name, fn, threads=threads)
            self.agents[agent_name] = Agent(
                name=agent_name,
                fn=fn,
                retry=retry or RetryPolicy(),
                within=within,
                breaker=breaker,
                service=service,
                threads=threads,
                resource=resource,
                exclusive_by=exclusive_by,
                batch=batch,
            )
            return fn

        return register

    def resource(
        self,
        name: str,
        *,
        kind: str,
        info: dict[str, JsonValue] | None = None,
        capacity: int | None = None,
        rate: float | None = None,
    ) -> Resource:
        """Declare a resource: its row is created when the app opens, if none has its name.

        An existing row is never overwritten: an operator's change (`shepherd
        resources set`) stays, whatever the code declares.

        Args:
            name: The resource's name.
            kind: What it is (`sqlite`, `postgres`, `http`...), for the handlers.
            info: Its connection details, a JSON object (no secrets: it is listed).
            capacity: The most handlers using it at once, cluster-wide; None: no cap.
            rate: Calls per second, cluster-wide; None: no limit.

        Returns:
            The resource as declared.

        Raises:
            InvalidResourceError: A value breaks a rule (a ConfigError naming the
                resource and the field), or `name` was declared already with
                other values.
        """
        resource = checked_resource(
            Resource(
                name=name,
                kind=kind,
                info={} if info is None else info,
                capacity=capacity,
                rate=rate,
            )
        )
        declared = self.resources.get(resource.name)
        if declared is not None and declared != resource:
            raise InvalidResourceError(
                f"resource {name!r}", "name", "declared twice, with different values"
            )
        self.resources[resource.name] = resource
        return resource

    @property
    def resolver(self) -> Resolver:
        """Where entities live: `await app.resolver.resolve(entity)`."""
        return self._resolver

    def check(self) -> None:
        """Check that every agent a workflow calls is registered on this app.

        The agents a workflow calls are those named by a string literal in a
        `ctx.call("agent", ..., undo="agent")` of its function's source (names
        computed at run time are not seen), and those it declares with
        `@app.workflow(..., agents=[...])`. `run` checks before it starts a
        scheduler: a scheduler fails each task that calls an agent not
        registered on its own app, even one served by another process.

        Raises:
            IncompleteAppError: Agents are missing (a ConfigError); the message names each one, where it
                is called, and the workflow that calls it.
        """
        problems = missing_agents(self.workflows.values(), self.agents)
        if problems:
            raise IncompleteAppError(describe(problems))

    # -- life cycle --------------------------------------------------------
    @property
    def store(self) -> Store:
        """The state store (created on first use, opened by `open`)."""
        if self._store is None:
            self._store = open_store(
                self.settings.store,
                clock=self.clock,
                sqlite_synchronous=self.settings.sqlite_synchronous,
                max_payload_bytes=self.settings.max_payload_bytes,
                read_pool_min=self.settings.read_pool_min,
                read_pool_max=self.settings.read_pool_max,
                store_timeout=self.settings.store_timeout,
            )
        return self._store

    async def open(self) -> App:
        """Open the store and apply migrations (idempotent)."""
        if self._opened:
            return self
        if self._open_lock is None:
            self._open_lock = asyncio.Lock()
        async with self._open_lock:
            if not self._opened:
                await self.store.open()
                await self._declare_resources()
                self._opened = True
        return self

    async def _declare_resources(self) -> None:
        """Create the declared resources that the store does not hold (one transaction)."""
        if self.resources:
            store = self.store
            await asyncio.gather(*(store.declare_resource(r) for r in self.resources.values()))

    async def close(self) -> None:
        """Wait for alerts in flight, run the `on_close` hooks and close the store."""
        if self._caller is not None:
            self._caller.close()
        if self._alerts:
            await asyncio.gather(*self._alerts, return_exceptions=True)
        while self.on_close:
            hook = self.on_close.pop()
            try:
                await hook()
            except Exception:
                log.exception("an on_close hook failed")
        if self._store is not None:
            await self._store.close()
        self._opened = False

    async def __aenter__(self) -> App:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- application API -----------------------------------------------------
    async def submit(
        self,
        workflow: str,
        data: JsonValue = None,
        *,
        key: str | None = None,
        reply_to: str | None = None,
        connection: object | None = None,
    ) -> str:
        """Submit a task; return its id. A repeated `key` returns the existing task's id.

        Args:
            workflow: The registered workflow to run.
            data: Its input (JSON).
            key: An idempotency key: a second submit with the same key (for the
                same workflow) creates nothing and returns the first task's id,
                also after that task was purged by retention, for `key_retention`.
            reply_to: A tag for the task's events (`read_events(reply_to=...)`).
            connection: Transactional submit (PostgreSQL store only): your own
                psycopg 3 `AsyncConnection` to the store's database, with a
                transaction open. The task is written in YOUR transaction, so it
                exists if and only if you commit (together with your own rows),
                and no role sees it before. Submit last and commit promptly:
                until you commit, event readers (`events`) see no newer event.
                See docs/howto/transactional-submit.md.

        Raises:
            UnknownWorkflowError: No workflow of that name is registered.
            PayloadError: `data` is not acceptable JSON (with `connection`, raised
                before any statement: your transaction is untouched), or `key` or
                `reply_to` is not a str a store can keep (not valid UTF-8, or
                holding a NUL character); both raised before the store is touched.
            ConfigError: `connection` was given but the store is not PostgreSQL,
                or the connection has no usable transaction.
            CommitUnknownError: The store was lost while the submit committed: the
                task may or may not exist (the message says whether a retry is safe).
            StoreUnavailableError: The store cannot be reached; nothing was written.
        """
        task = new_task(self.workflows, workflow, data, key=key, reply_to=reply_to)
        if tracing.ENABLED and tracing.active():
            await self.open()  # the span is the submit's, not the store's opening
            with tracing.submit_span([workflow]) as traced:
                task_id = await self._submit(replace(task, trace=traced.context), connection)
                traced.submitted([task_id])
                return task_id
        return await self._submit(task, connection)

    async def _submit(self, task: NewTask, connection: object | None) -> str:
        await self.open()
        try:
            if connection is not None:
                submitted = await self.store.submit_task_in(task, connection)
            else:
                submitted = await self.store.submit_task(task)
        except CommitUnknownError as exc:
            raise commit_unknown(exc, [task]) from None
        return submitted.task_id

    async def submit_many(
        self, submissions: Iterable[Submission], *, connection: object | None = None
    ) -> list[str]:
        """Submit many tasks in ONE transaction; return their ids, in order.

        For producers that have many tasks at once: one commit, and one
        wake-up of the schedulers, instead of one per task. Each
        `Submission(workflow, data, key=..., reply_to=...)` means what the
        arguments of `submit` mean. The tasks are written all or none. A key
        already used (for the same workflow) returns the existing task's id,
        and a key repeated within `submissions` gives the same id at each of
        its places (one task is created).

        Args:
            submissions: The tasks (`shepherd.Submission`); none writes nothing.
            connection: Transactional submit (PostgreSQL store only), as in
                `submit`: every task is written in YOUR transaction.

        Raises:
            UnknownWorkflowError: A submission names no registered workflow.
            PayloadError: A submission is not a `Submission`, its `data` is not
                acceptable JSON, or its `key` or `reply_to` is not a str a store
                can keep. Nothing is written (with `connection`, no statement
                is sent); the message starts with the submission's index
                (`submissions[3]: ...`).
            ConfigError: As `submit`, for `connection`.
            CommitUnknownError: The store was lost while the transaction
                committed: all the tasks or none exist (the message says whether
                a retry is safe: it is when every submission has a key).
            StoreUnavailableError: The store cannot be reached; nothing was written.
        """
        tasks = new_tasks(self.workflows, submissions)
        if not tasks and connection is None:
            return []
        if tracing.ENABLED and tasks and tracing.active():
            await self.open()
            with tracing.submit_span([task.workflow for task in tasks]) as traced:
                tasks = [replace(task, trace=traced.context) for task in tasks]
                task_ids = await self._submit_many(tasks, connection)
                traced.submitted(task_ids)
                return task_ids
        return await self._submit_many(tasks, connection)

    async def _submit_many(self, tasks: list[NewTask], connection: object | None) -> list[str]:
        await self.open()
        try:
            if connection is not None:
                submitted = await self.store.submit_tasks_in(tasks, connection)
            else:
                submitted = await self.store.submit_tasks(tasks)
        except CommitUnknownError as exc:
            raise commit_unknown(exc, tasks) from None
        return [s.task_id for s in submitted]

    async def get_task(self, task_id: str) -> Task:
        """The task with its steps.

        Raises:
            UnknownTaskError: No such task; the message says when a task of
                that id ended and was purged by retention.
        """
        await self.open()
        task = await self.store.get_task(task_id)
        if task is None:
            raise await self._unknown(task_id)
        return task

    async def _unknown(self, task_id: str) -> UnknownTaskError:
        """The error for a task id the store does not hold: purged (when it says so), or unknown."""
        tombstone = await self.store.get_tombstone(task_id)
        if tombstone is None:
            return UnknownTaskError(task_id)
        return UnknownTaskError(
            task_id, process_state=str(tombstone.process_state), purged_at=tombstone.purged_at
        )

    async def list_tasks(
        self,
        *,
        states: Sequence[ProcessState] = (),
        workflow: str | None = None,
        key: str | None = None,
        id_prefix: str | None = None,
        created_from: datetime | None = None,
        created_to: datetime | None = None,
        before: TaskCursor | None = None,
        limit: int = 100,
    ) -> list[Task]:
        """Tasks, newest first by (created_at, id), without their steps.

        Every filter given must match: one of `states` (any when empty), the
        `workflow`, the business `key`, an id starting with `id_prefix`,
        created in [`created_from`, `created_to`). `before` continues after a
        page: `TaskCursor.of(page[-1])` lists the next, older tasks (keyset
        pagination: any page costs what the first does).

        Raises:
            ConfigError: A filter is malformed (a text with a NUL, a time
                without a time zone, ...); nothing is read.
        """
        await self.open()
        return await self.store.list_tasks(
            states=states,
            workflow=workflow,
            key=key,
            id_prefix=id_prefix,
            created_from=created_from,
            created_to=created_to,
            before=before,
            limit=limit,
        )

    async def history(self, task_id: str) -> list[Event]:
        """A task's events, oldest first."""
        await self.open()
        return await self.store.task_events(task_id)

    async def retry(
        self,
        task_id: str,
        *,
        seq: int | None = None,
        payload: JsonValue = None,
        by: str | None = None,
    ) -> Task:
        """Put an `error` task back to work from its failed step (or step `seq`).

        `by`, who retries it, is recorded in the task's `retried` event.
        """
        await self.open()
        return await self.store.retry_task(task_id, seq=seq, payload=payload, by=by)

    async def cancel(self, task_id: str, *, by: str | None = None) -> Task:
        """Undo a task that has not ended: it is compensated, then `cancelled`.

        `by`, who cancels it, is recorded in the task's `cancel_requested` event.
        """
        await self.open()
        return await self.store.cancel_task(task_id, by=by)

    async def call(
        self,
        agent: str,
        payload: JsonValue = None,
        *,
        within: float | None = None,
        attempts: int = 3,
        timeout: float | None = None,  # noqa: ASYNC109 - the public API mirrors asyncio.wait_for
    ) -> JsonValue:
        """Call an agent from plain code, durably, and return its result.

        The call is stored (it is not a task: no workflow, no steps) and handled
        by one process running the agent role at a time. Its answer is committed
        before this returns. A handling that has not answered `within` seconds
        after it started (its process died, or it overran) is handed to another
        process; after `attempts` handlings without an answer the call is
        answered with an error and an operator is alerted.

        Args:
            agent: A registered agent.
            payload: The handler's `request.payload` (JSON).
            within: Seconds one handling may take (default: the agent's `within`,
                else `default_step_within`).
            attempts: The most handlings the call gets (at least 1).
            timeout: Seconds to wait for the answer (default: `within` times
                `attempts`, plus a second per attempt).

        Raises:
            CallFailedError: The answer is an error: the handler's permanent
                error, its bug out of tries, or the call given up.
            TimeoutError: No answer within `timeout`. The call may still run
                and be answered; nobody reads that answer, and the call is
                deleted a minute after `timeout`.
            UnknownAgentError: No agent of that name is registered here.
            OwnerKeyError: The agent is exclusive and the payload gives no owning
                key (its field is missing or not a non-empty string, or the key
                function raised or gave something else); nothing is sent.
            PayloadError: `payload` is not JSON or is too large; nothing is sent.
            ConfigError: `within`, `attempts` or `timeout` is not positive.
        """
        spec = self.agents.get(agent)
        if spec is None:
            raise UnknownAgentError(agent)
        window = within if within is not None else spec.within or self.settings.default_step_within
        for name, value in (("within", window), ("attempts", attempts), ("timeout", timeout)):
            if value is not None and (isinstance(value, bool) or not value > 0):
                raise ConfigError(name, f"must be positive, not {value!r}")
        wait = timeout if timeout is not None else (window + 1.0) * attempts
        owner_key: str | None = None
        if spec.exclusive_by is not None:
            found = owner_key_of(spec.exclusive_by, payload)
            if isinstance(found, ValueError):
                raise OwnerKeyError(agent, str(found))
            owner_key = found
        await self.open()
        if self._caller is None:
            self._caller = Caller(self.store, settings=self.settings, clock=self.clock)
        return await self._caller.call(
            agent, payload, within=window, attempts=attempts, timeout=wait, owner_key=owner_key
        )

    async def result(self, task_id: str, *, timeout: float | None = None) -> JsonValue:  # noqa: ASYNC109 - the public API mirrors asyncio.wait_for
        """Wait for the task to end and return its result.

        Raises:
            TaskFailedError: The task ended compensated, cancelled or in error.
            TimeoutError: It did not end within `timeout` seconds.
            UnknownTaskError: No such task (or it was purged by retention: the
                message says how it ended and when it was purged).
        """
        await self.open()
        store = self.store
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            wake = store.signals.event(ch.task_channel(task_id))
            task = await store.get_task(task_id)
            if task is None:
                raise await self._unknown(task_id)
            if task.process_state is ProcessState.PROCESSED:
                return task.result
            if task.process_state in (
                ProcessState.ERROR,
                ProcessState.COMPENSATED,
                ProcessState.CANCELLED,
            ):
                raise TaskFailedError(task_id, str(task.process_state), task.error)
            wait = self.settings.poll_interval * 5
            if deadline is not None:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise TimeoutError(f"task {task_id} did not end within {timeout}s")
                wait = min(wait, remaining)
            await Signals.wait(wake, wait)

    async def events(self, reply_to: str | None, *, after_id: int = 0) -> AsyncIterator[Event]:
        """Status events for `reply_to` (all events when None), as they happen."""
        await self.open()
        store = self.store
        cursor = after_id
        while True:
            wake = store.signals.event(ch.EVENTS)
            batch = await store.read_events(reply_to=reply_to, after_id=cursor)
            for event in batch:
                cursor = event.id
                yield event
            if not batch:
                await Signals.wait(wake, self.settings.poll_interval)

    # -- alerts ------------------------------------------------------------
    async def alerts(
        self, *, open_only: bool = False, limit: int = 100, task_id: str | None = None
    ) -> list[StoredAlert]:
        """The stored operator alerts, newest first: only those not acknowledged if
        `open_only`, only those of the task `task_id` if given.

        An alert is stored in the transaction that moves its task into `error`,
        so it is listed even when its process died before the sinks were told.

        Raises:
            ConfigError: `limit` is not a whole number of at least 1.
        """
        await self.open()
        return await self.store.list_alerts(open_only=open_only, limit=limit, task_id=task_id)

    async def acknowledge_alert(self, alert_id: int, *, by: str) -> StoredAlert:
        """Acknowledge a stored alert by `by` (who handles it); the alert as stored.

        An alert acknowledged already keeps its first acknowledgement, which
        is returned. Acknowledging does not change the task: retry or cancel it.

        Raises:
            UnknownAlertError: No alert has that id.
            ConfigError: `by` is empty (or not a str, or too long); nothing is written.
        """
        await self.open()
        return await self.store.acknowledge_alert(alert_id, by=by)

    # -- operators and the overview -------------------------------------------
    async def add_operator(self, name: str) -> str:
        """Make a named operator token; return the token (only its hash is stored: show it once).

        Raises:
            ConfigError: `name` is not 1 to 64 ASCII letters, digits and `._@-`
                (from a letter or digit).
            OperatorExistsError: An operator has that name already.
        """
        await self.open()
        return await self.store.add_operator(name)

    async def operators(self) -> list[Operator]:
        """The named operators, by name, with when each was made and last used."""
        await self.open()
        return await self.store.list_operators()

    async def remove_operator(self, name: str) -> None:
        """Delete an operator: its token opens nothing from then on.

        Raises:
            UnknownOperatorError: No operator has that name.
        """
        await self.open()
        await self.store.remove_operator(name)

    async def authenticate(self, token: str) -> str | None:
        """The name of the operator whose token `token` is, or None."""
        await self.open()
        return await self.store.authenticate(token)

    async def count_tasks(self) -> dict[ProcessState, int]:
        """How many tasks are in each `process_state` (states without tasks are absent)."""
        await self.open()
        return await self.store.count_tasks()

    async def throughput(
        self, *, window: timedelta = timedelta(hours=1), bucket: timedelta = timedelta(minutes=1)
    ) -> list[ThroughputBucket]:
        """The tasks that ended over the last `window`, per `bucket`, oldest first.

        Buckets are aligned on multiples of `bucket` (store clock); the last
        holds now. A task counts once, by when it ended and how (a task in
        `error` that is retried leaves its bucket).

        Raises:
            ConfigError: `window` or `bucket` is not positive, or the window
                holds more than 10,000 buckets.
        """
        step = checked_buckets(window, bucket)
        await self.open()
        starts = bucket_starts(self.store.now(), window, bucket)
        return fill(starts, await self.store.ended_counts(since=starts[0], bucket=step))

    async def leader(self) -> Lease | None:
        """The supervisor leader's lease (holder, epoch, expiry); None when no one leads now."""
        await self.open()
        lease = await self.store.get_lease(LEASE)
        return lease if lease is not None and lease.expires_at > self.store.now() else None

    async def breakers(self) -> list[Breaker]:
        """The circuit breaker of every remote service, shared through the store, by service."""
        await self.open()
        return await self.store.list_breakers()

    async def workers(self, *, since: timedelta = timedelta(hours=1)) -> list[Worker]:
        """The worker registry: live processes, and those that stopped or died within `since`.

        Raises:
            ConfigError: `since` is not a timedelta.
        """
        if not isinstance(since, timedelta):
            raise ConfigError("since", f"must be a timedelta, not {since!r}")
        await self.open()
        try:  # never less than the ttl: every live process has beaten since then
            start: datetime | None = self.store.now() - max(
                since, timedelta(seconds=self.settings.worker_ttl)
            )
        except OverflowError:  # further back than datetime goes: everything
            start = None
        return await self.store.list_workers(since=start)

    def raise_alert(self, task: Task, *, reason: str, failure_count: int | None = None) -> None:
        """Send an operator alert to every sink, in the background.

        The store keeps the same alert already: the write that moved the task
        into `error` stored it (`alerts`); the sinks are told best effort.
        """
        alert = Alert(
            task_id=task.id,
            workflow=task.workflow,
            key=task.key,
            reason=reason,
            failure_count=task.failure_count if failure_count is None else failure_count,
            at=self.clock.now(),
        )
        job = asyncio.get_running_loop().create_task(send_all(self.sinks, alert))
        self._alerts.add(job)
        job.add_done_callback(self._alerts.discard)

    def alert_call(self, call: CallRequest) -> None:
        """Alert an operator of a call given up after its handlings kept failing to answer."""
        alert = Alert(
            task_id=call.call_id,
            workflow=f"call:{call.agent}",
            key=None,
            reason=(
                f"call to {call.agent} given up after {call.attempt} handlings without an "
                f"answer (each died or took longer than {call.within:g} s); its caller got "
                "a CallFailedError"
            ),
            failure_count=call.attempt,
            at=self.clock.now(),
        )
        job = asyncio.get_running_loop().create_task(send_all(self.sinks, alert))
        self._alerts.add(job)
        job.add_done_callback(self._alerts.discard)

    # -- roles -------------------------------------------------------------
    async def run(
        self,
        roles: Sequence[str] = ROLES,
        *,
        agents: Sequence[str] | None = None,
        ready: Callable[[], None] | None = None,
    ) -> None:
        """Run the given roles in this process until cancelled.

        Args:
            roles: The roles to run (`scheduler`, `agent`, `supervisor`).
            agents: Glob patterns (`["payments.*"]`): the agent role serves only
                the registered agents matching any of them, so that each remote
                service gets a pool of processes of its own. The other agents'
                requests wait for a process that serves them; a scheduler here
                still runs every workflow. None serves every agent.
            ready: Called once every role has started.

        Raises:
            ConfigError: A role is unknown; the roles include the scheduler and
                a workflow calls an agent that is not registered (see `check`);
                `agents` is given without the agent role, or one of its patterns
                matches no registered agent. Raised before any role starts.
        """
        served = self._check_roles(roles, agents)
        await self.open()
        registry = self.build_registry(roles, served)
        built = self.build_roles(roles, agents=served)
        for role in built:
            # Claims, requests, calls and keys stop while this process's beats fail.
            if not isinstance(role, Supervisor):
                role.standing = registry.standing
        loops = [*built, registry]
        self.watchdog.start()
        try:
            with raised_threshold(self.settings.gc_threshold):
                await run_roles(loops, ready=ready)
        finally:
            self.watchdog.stop()

    def _check_roles(
        self, roles: Sequence[str], agents: Sequence[str] | None = None
    ) -> tuple[str, ...] | None:
        """Check what `run` is asked to run; return the agents it serves (None: all).

        Refuses unknown roles, an incomplete app where a scheduler would run it,
        and a pool (`agents`) without the agent role or with a pattern that
        matches no registered agent.
        """
        unknown = [r for r in roles if r not in ROLES]
        if unknown or not roles:
            raise ConfigError("roles", f"unknown roles {unknown} (choose from {', '.join(ROLES)})")
        served = check_pool(roles, agents, self.agents)
        if "scheduler" in roles:
            self.check()
        return served

    def build_roles(
        self, roles: Sequence[str], *, agents: Iterable[str] | None = None
    ) -> list[Scheduler | AgentWorker | CallServer | OwnerServer | Supervisor]:
        """The role instances for `roles`, named after this process.

        `agents` names the agents the agent role serves (default: every one);
        the agent role serves their calls (`call`) too.
        """
        built: list[Scheduler | AgentWorker | CallServer | OwnerServer | Supervisor] = []
        scheduler = None
        if "scheduler" in roles:
            scheduler = self.build_scheduler()
            built.append(scheduler)
        if "agent" in roles:
            worker = self.build_agent_worker(agents=agents)
            # Steps go straight to this process's agent worker when it has room, and
            # replies to this process's scheduler are recorded where they are made.
            worker.recorder = scheduler
            if scheduler is not None:
                scheduler.taker = worker
            built.append(worker)
            plain = {n: a for n, a in worker.agents.items() if a.exclusive_by is None}
            exclusive = {n: a for n, a in worker.agents.items() if a.exclusive_by is not None}
            built.append(
                CallServer(
                    self.store,
                    worker=f"{self.instance}/c",
                    agents=plain,
                    settings=self.settings,
                    clock=self.clock,
                    gave_up=self.alert_call,
                )
            )
            built.append(
                OwnerServer(
                    self.store,
                    instance=self.instance,
                    agents=exclusive,
                    settings=self.settings,
                    clock=self.clock,
                    gave_up=self.alert_call,
                )
            )
        if "supervisor" in roles:
            built.append(self.build_supervisor())
        return built

    # Each role gets what it uses, no more: its slice of the store, the settings,
    # the clock, and the registrations, metrics and alerts it needs.
    def build_scheduler(self, *, owner: str | None = None) -> Scheduler:
        """A scheduler of this app's workflows (named after this process by default)."""
        return Scheduler(
            self.store,
            owner=owner or f"{self.instance}/s",
            settings=self.settings,
            clock=self.clock,
            workflows=self.workflows,
            agents=self.agents,
            raise_alert=self.raise_alert,
            resolver=self.resolver,
            metrics=self.metrics,
        )

    def build_agent_worker(
        self, *, worker: str | None = None, agents: Iterable[str] | None = None
    ) -> AgentWorker:
        """An agent worker for the agents registered now (named after this process by default).

        Args:
            worker: Its name in the requests it takes.
            agents: The names of the agents it serves (default: every registered
                one); `shepherd.agents.pools.pool_agents` picks them by pattern.

        Raises:
            ConfigError: `agents` names an agent that is not registered.
        """
        if agents is None:
            hosted = list(self.agents.values())
        else:
            names = sorted(set(agents))
            missing = [name for name in names if name not in self.agents]
            if missing:
                raise ConfigError(
                    "agents",
                    f"no agent registered as {', '.join(map(repr, missing))} "
                    f"(registered: {', '.join(sorted(self.agents)) or 'none'})",
                )
            hosted = [self.agents[name] for name in names]
        return AgentWorker(
            self.store,
            worker=worker or f"{self.instance}/a",
            agents=hosted,
            settings=self.settings,
            clock=self.clock,
            metrics=self.metrics,
        )

    def build_supervisor(
        self, *, holder: str | None = None, rng: random.Random | None = None
    ) -> Supervisor:
        """A supervisor of this app's workflows (named after this process by default)."""
        return Supervisor(
            self.store,
            holder=holder or f"{self.instance}/v",
            instance=self.instance,
            settings=self.settings,
            clock=self.clock,
            workflows=self.workflows,
            raise_alert=self.raise_alert,
            rng=rng,
            metrics=self.metrics,
        )

    def build_registry(
        self, roles: Sequence[str], agents: Iterable[str] | None = None
    ) -> WorkerRegistry:
        """The worker registry loop of this process, which runs `roles` (and serves `agents`)."""
        return WorkerRegistry(
            self.store,
            instance=self.instance,
            roles=roles,
            agents=self.agents if agents is None else agents,
            settings=self.settings,
            clock=self.clock,
        )

    @contextlib.asynccontextmanager
    async def running(
        self, roles: Sequence[str] = ROLES, *, agents: Sequence[str] | None = None
    ) -> AsyncIterator[App]:
        """Run the roles (serving `agents`, as in `run`) in the background for the block.

        Raises:
            ConfigError: As `run` does, on entering the block.
        """
        self._check_roles(roles, agents)
        await self.open()
        job = asyncio.create_task(self.run(roles, agents=agents))
        try:
            yield self
        finally:
            job.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await job


__all__ = ["App", "Handler", "Workflow"]
