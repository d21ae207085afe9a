"""App: registers workflows and agents, submits tasks and waits for them, runs the roles.

An App owns its registry, its store, its clock and its alert sinks. It opens
lazily on first use, or explicitly with `async with App(...) as app`. The
operator's reads and actions are `app.operations` (`shepherd.operations`);
the roles a process runs are built by `shepherd.assembly`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, final

from shepherd.agents import Handler
from shepherd.alerts import Alert, AlertSink, Deliveries, sink_from_spec
from shepherd.assembly import ROLES, Assembly, check_roles, instance_id, store_of
from shepherd.calling import Caller, call_resolution
from shepherd.clock import Clock, SystemClock
from shepherd.config import Settings
from shepherd.governance.resolver import Resolver, StaticResolver, StoreResolver
from shepherd.metrics import Metrics
from shepherd.operations import Operations
from shepherd.operator_methods import OperatorMethods
from shepherd.registration import Registrations
from shepherd.registration_checks import call_plan
from shepherd.reminding import ReminderMethods
from shepherd.scheduler import Workflow
from shepherd.submission import Submission, new_task, new_tasks, submit_all, submit_one
from shepherd.waiting import follow_events, wait_result
from shepherd.watchdog import Watchdog

if TYPE_CHECKING:
    from shepherd.core.alerts import StoredAlert
    from shepherd.core.records import CallRequest, Event, JsonValue, Task
    from shepherd.store.contract import Store

log = logging.getLogger("shepherd")


@final
class App(Registrations, OperatorMethods, ReminderMethods):
    """A shepherd application: it registers (`Registrations`), reads and acts on its
    tasks as an operator does (`OperatorMethods`), reminds its owners (`ReminderMethods`),
    and runs."""

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
        #: Where this app's alerts go, and those on their way (`shepherd.alerts`).
        self.deliveries = Deliveries([sink_from_spec(s) for s in alerts], self.clock)
        self.sinks: list[AlertSink] = self.deliveries.sinks
        super().__init__()
        #: Counters of this process (calls, retries, timeouts, breaker changes).
        self.metrics = Metrics()
        #: Whether `open` creates and migrates the store, or (False: the operator's
        #: commands, the dashboard) opens a current one as it is, writing nothing,
        #: else UnusableStoreError. Set it before the store is first used.
        self.migrate = True
        self._store: Store | None = None
        self._opened = False
        self._open_lock: asyncio.Lock | None = None
        self._caller: Caller | None = None
        #: Async callables run once by the next `close`, last added first (then forgotten);
        #: helpers such as `shepherd.agents.http` close what they opened for this app here.
        self.on_close: list[Callable[[], Awaitable[object]]] = []
        self.instance = instance_id()
        #: Watches the event loop while `run` runs: blocks longer than `block_warning`.
        self.watchdog = Watchdog(
            threshold=self.settings.block_warning, on_block=self.metrics.loop_blocks.inc
        )
        self._resolver: Resolver = StoreResolver() if resolver is None else resolver
        if isinstance(self._resolver, StoreResolver | StaticResolver):
            self._resolver.bind(self)
        #: The operator's reads and actions over this app's store (`shepherd.operations`).
        self.operations = Operations(self)

    @property
    def resolver(self) -> Resolver:
        """Where entities live: `await app.resolver.resolve(entity)`."""
        return self._resolver

    # -- life cycle --------------------------------------------------------
    @property
    def store(self) -> Store:
        """The state store (created on first use, opened by `open`)."""
        if self._store is None:
            self._store = store_of(self.settings, self.clock, migrate=self.migrate)
        return self._store

    async def open(self) -> App:
        """Open the store, apply migrations, create the declared resources and schedules (idempotent).

        With `migrate` False: open an existing, current store as it is (see `migrate`).
        """
        if self._opened:
            return self
        if self._open_lock is None:
            self._open_lock = asyncio.Lock()
        async with self._open_lock:
            if not self._opened:
                await self.store.open()
                if self.migrate:
                    await self.declare_in(self.store)
                self._opened = True
        return self

    async def close(self) -> None:
        """Wait for alerts in flight, run the `on_close` hooks and close the store."""
        if self._caller is not None:
            self._caller.close()
        await self.deliveries.drain()
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
        delay: float | None = None,
        not_before: datetime | None = None,
        deadline: float | None = None,
    ) -> str:
        """Submit a task; return its id. A repeated `key` returns the existing task's id.

        Args:
            workflow: The registered workflow to run.
            data: Its input (JSON).
            key: An idempotency key: a second submit with it (same workflow) creates
                nothing and returns the first task's id, also after that task was
                purged by retention, for `key_retention`.
            reply_to: A tag for the task's events (`read_events(reply_to=...)`).
            connection: Transactional submit (PostgreSQL store only): your psycopg 3
                `AsyncConnection` to the store's database, a transaction open. The
                task is written in YOUR transaction: it exists if and only if you
                commit (docs/howto/transactional-submit.md); until then, no role
                sees it and event readers (`events`) see no newer event.
            delay: Seconds from now, on the store's clock, before it may start (the
                task is stored at once; docs/howto/delayed-tasks.md).
            not_before: Or the aware datetime before which it may not start.
            deadline: Seconds it has to end once due, else it is cancelled with the
                reason `deadline passed` (default: the workflow's; deadlines.md).

        Raises:
            UnknownWorkflowError: No workflow of that name is registered.
            PayloadError: `data` is not acceptable JSON, or `key` or `reply_to` is not
                a str a store can keep (not valid UTF-8, or holding a NUL); raised
                before the store (or, with `connection`, your transaction) is touched.
            ConfigError: `connection` was given but the store is not PostgreSQL,
                or the connection has no usable transaction; or `delay`,
                `not_before` or `deadline` is refused (the message names it).
            CommitUnknownError: The store was lost while the submit committed: the
                task may or may not exist (the message says whether a retry is safe).
            StoreUnavailableError: The store cannot be reached; nothing was written.
        """
        task = new_task(
            self.workflows,
            workflow,
            data,
            key=key,
            reply_to=reply_to,
            delay=delay,
            not_before=not_before,
            deadline=deadline,
        )
        await self.open()
        return await submit_one(self.store, task, connection)

    async def signal(
        self,
        task: str,
        name: str,
        payload: JsonValue = None,
        *,
        workflow: str | None = None,
        idempotency_key: str | None = None,
    ) -> int:
        """Send signal `name` to `task` (its id, or its key with `workflow=`): the signal's id.

        Consumed by the task's first `ctx.wait_for(name)`, before or after it
        waits; the same `idempotency_key` twice is one signal (the first's id).
        Errors as `app.operations.signals.send` (`shepherd.signalling`).
        """
        sent = await self.operations.signals.send(
            task, name, payload, workflow=workflow, idempotency_key=idempotency_key
        )
        return sent.id

    async def submit_many(
        self, submissions: Iterable[Submission], *, connection: object | None = None
    ) -> list[str]:
        """Submit many tasks in ONE transaction; return their ids, in order.

        One commit and one wake-up of the schedulers, not one per task. Each
        `Submission(workflow, data, key=..., reply_to=..., delay=..., ...)` means what
        the arguments of `submit` mean, and so does `connection`. The tasks are written
        all or none. A key used already returns the existing task's id; a key
        repeated within `submissions` gives one task's id at each of its places.

        Raises:
            UnknownWorkflowError: A submission names no registered workflow.
            PayloadError: A submission is not a `Submission`, or `submit` would refuse
                its data, key or reply_to; nothing is sent; the message starts
                `submissions[3]: ...`.
            ConfigError: As `submit`, for `connection` and for timing (prefixed).
            CommitUnknownError: The store was lost while the transaction committed:
                all the tasks or none exist (the message says whether a retry is
                safe: it is when every submission has a key).
            StoreUnavailableError: The store cannot be reached; nothing was written.
        """
        tasks = new_tasks(self.workflows, submissions)
        if not tasks and connection is None:
            return []
        await self.open()
        return await submit_all(self.store, tasks, connection)

    async def call(
        self,
        agent: str,
        payload: JsonValue = None,
        *,
        within: float | None = None,
        attempts: int = 3,
        timeout: float | None = None,  # noqa: ASYNC109 - the public API mirrors asyncio.wait_for
        entity: str | None = None,
    ) -> JsonValue:
        """Call an agent from plain code, durably, and return its result.

        The call is stored (it is not a task: no workflow, no steps) and handled
        by one process running the agent role at a time; its answer is committed
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
            entity: The entity the call is about, resolved as `ctx.call` resolves a
                step's and kept with the call (`request.resolution`; docs/howto/calls.md).

        Raises:
            CallFailedError: The answer is an error: the handler's permanent
                error, its bug out of tries, the call given up, or its breaker open.
            TimeoutError: No answer within `timeout` (the call may still be
                answered, unread; it is deleted a minute after `timeout`).
            UnknownAgentError: No agent of that name is registered here.
            OwnerKeyError: The agent is exclusive and the payload gives no owning
                key; nothing is sent.
            PayloadError: `payload` is not JSON or is too large; nothing is sent.
            ConfigError: `within`, `attempts` or `timeout` is not positive, or
                `entity` is not a str (the message names the agent).
            ResourceError: `entity` cannot be resolved, or lives on another resource
                than the agent's `resource=` (`ResourceConflictError`); nothing is sent.
        """
        plan = call_plan(
            self.agents, agent, payload, within, attempts, timeout, self.settings, entity=entity
        )
        await self.open()
        where = await call_resolution(self.resolver, self.agents[agent], entity)
        self._caller = self._caller or Caller(self.store, settings=self.settings, clock=self.clock)
        return await self._caller.call(agent, payload, plan, resolution=where)

    async def result(self, task_id: str, *, timeout: float | None = None) -> JsonValue:  # noqa: ASYNC109 - the public API mirrors asyncio.wait_for
        """Wait for the task to end and return its result.

        Raises:
            TaskFailedError: The task ended compensated, cancelled or in error.
            TimeoutError: It did not end within `timeout` seconds.
            UnknownTaskError: No such task (or it was purged by retention: the
                message says how it ended and when it was purged).
        """
        await self.open()
        poll = self.settings.poll_interval * 5
        return await wait_result(self.store, task_id, timeout=timeout, poll=poll)

    async def events(self, reply_to: str | None, *, after_id: int = 0) -> AsyncIterator[Event]:
        """Status events for `reply_to` (all events when None), as they happen."""
        await self.open()
        poll = self.settings.poll_interval
        async for event in follow_events(self.store, reply_to, after_id=after_id, poll=poll):
            yield event

    # -- alert delivery ----------------------------------------------------
    def raise_alert(self, task: Task, *, reason: str, failure_count: int | None = None) -> None:
        """Send an operator alert to every sink, in the background (the store has it already)."""
        count = task.failure_count if failure_count is None else failure_count
        self.deliveries.firing(task.id, task.workflow, task.key, reason, count)

    async def announce_resolution(self, alert: StoredAlert) -> None:
        """Tell every sink that a stored alert was resolved (the supervisor's leader calls it)."""
        await self.deliveries.resolved(alert)

    def alert_call(self, call: CallRequest) -> None:
        """Alert an operator of a call given up after its handlings kept failing to answer."""
        self.deliveries.call_given_up(call)

    def alert_owner(self, agent: str, key: str, failures: int, error: str) -> None:
        """Alert an operator of a key whose owners' `on_acquire` keeps failing here."""
        self.deliveries.owner_failing(agent, key, failures, error)

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
            agents: Glob patterns (`["payments.*"]`): the agent role serves only the
                registered agents matching one, so that each remote service gets a
                pool of processes of its own (the others' requests wait for a
                process that serves them). None serves every agent.
            ready: Called once every role has started.

        Raises:
            ConfigError: A role is unknown; the roles include the scheduler and a
                workflow calls an agent that is not registered (see `check`);
                `agents` is given without the agent role, or one of its patterns
                matches no registered agent. Raised before any role starts.
        """
        served = check_roles(roles, agents, workflows=self.workflows, agents=self.agents)
        await self.open()
        await Assembly(self).run(roles, agents=served, watchdog=self.watchdog, ready=ready)

    @contextlib.asynccontextmanager
    async def running(
        self, roles: Sequence[str] = ROLES, *, agents: Sequence[str] | None = None
    ) -> AsyncIterator[App]:
        """Run the roles (serving `agents`, as in `run`) in the background for the block.

        Raises:
            ConfigError: As `run` does, on entering the block.
        """
        check_roles(roles, agents, workflows=self.workflows, agents=self.agents)
        await self.open()
        job = asyncio.create_task(self.run(roles, agents=agents))
        try:
            yield self
        finally:
            job.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await job


__all__ = ["ROLES", "App", "Handler", "Workflow", "instance_id"]
