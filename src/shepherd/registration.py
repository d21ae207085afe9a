"""What an App registers: workflows, agents and resources, each checked as it is registered.

`Registrations` is the part of `App` that declares: `@app.workflow`,
`@app.agent`, `app.resource` and `app.check`. A bad option is refused with a
ConfigError naming it before anything is registered, so that a typo fails at
import, not when a task first runs. `call_plan` checks a call (`App.call`)
against the agent it calls.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from shepherd.agents import Agent
from shepherd.agents.batch import Batch
from shepherd.agents.threads import check_handler
from shepherd.core.limits import NAME_BYTES, too_long
from shepherd.core.resources import Resource, check_name
from shepherd.core.retry import RetryPolicy
from shepherd.core.schedules import CatchUp, Schedule
from shepherd.core.supervision import BackoffPolicy, SupervisionPolicy
from shepherd.core.timing import checked_deadline
from shepherd.errors import (
    ConfigError,
    InvalidResourceError,
    ShepherdError,
    TooLongError,
)
from shepherd.governance.lifecycle import check_life_cycle
from shepherd.payloads import dumps
from shepherd.registration_checks import (
    check_options,
    check_shared_breaker,
    check_wiring,
    checked_name,
)
from shepherd.scheduler import Workflow
from shepherd.scheduler.wiring import declared_agents
from shepherd.store.resource_rows import checked_resource
from shepherd.store.schedule_rows import checked_schedule

if TYPE_CHECKING:
    from shepherd.agents.agent import OwnerHook
    from shepherd.config import Settings
    from shepherd.core.breaker import BreakerPolicy
    from shepherd.core.records import JsonValue
    from shepherd.store.contract import Store

__all__ = ["Registrations"]

F = TypeVar("F", bound=Callable[..., Any])


class Registrations:
    """The workflows, agents and resources of an App, and the decorators that register them.

    `App` is its one subclass: it supplies the `settings` (the defaults of the
    options) and runs what is registered here.
    """

    settings: Settings

    def __init__(self) -> None:
        self.workflows: dict[str, Workflow] = {}
        self.agents: dict[str, Agent] = {}
        #: Resources declared with `resource`, created in the store when the app opens.
        self.resources: dict[str, Resource] = {}
        #: Schedules declared with `schedule`, created in the store when the app opens.
        self.schedules: dict[str, Schedule] = {}

    def workflow(
        self,
        name: str | None = None,
        *,
        complete_within: float | None = None,
        max_failures: int = 3,
        on_exhausted: Literal["error", "compensate"] = "error",
        backoff: BackoffPolicy | None = None,
        agents: Iterable[str] = (),
        deadline: float | None = None,
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
            deadline: Seconds each task has to end once due, unless its submit
                gives its own: the supervisor then cancels it with the reason
                `deadline passed` (docs/howto/deadlines.md). None: no deadline.

        Raises:
            ConfigError: An option is invalid, or the name is longer than
                NAME_BYTES of UTF-8 (`shepherd.core.limits`).
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
        try:
            default_deadline = None if deadline is None else checked_deadline(deadline)
        except ValueError as exc:
            raise ConfigError("deadline", str(exc)) from None

        def register(fn: F) -> F:
            wf_name = checked_name("workflow", name or fn.__name__)
            self.workflows[wf_name] = Workflow(
                name=wf_name,
                fn=fn,
                complete_within=float(within),
                policy=policy,
                agents=declared,
                deadline=default_deadline,
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
        on_acquire: OwnerHook | None = None,
        on_release: OwnerHook | None = None,
        owner_idle: float | None = None,
    ) -> Callable[[F], F]:
        """Register `async def handler(request)` as an agent (or a plain `def`, with `threads`).

        Args:
            name: The agent's name (default: the function's name).
            retry: How transient failures are retried inside `complete_by`.
            within: Default seconds a call to this agent may take.
            breaker: A circuit breaker for the remote service, shared through the
                store by every process (default: none).
            service: The remote service's name (default: the agent's name); agents
                that name the same service share its breaker. Only with `breaker`.
            threads: The handler is a plain, blocking `def`, run in a thread (at most
                `agent_threads` at once per worker) so that it does not block the
                event loop. At complete_by the step is given up, but the thread runs
                on and keeps its slot until it returns. It cannot call
                `request.heartbeat()` or `request.once()`.
            resource: The constrained resource the handler uses: while it runs it
                holds one of the resource's `capacity` slots, shared by every
                process, and each try takes a token of its `rate` (default: the
                resource of the call's resolution, when the step or the call
                named an `entity`; none without one). A step or call whose
                entity lives on another resource is refused. For an exclusive
                agent, each handling of a key (a batch too) holds one slot:
                at most `capacity` keys are handled at once, across owners.
            exclusive_by: Makes the agent exclusive: each call (`call`) has an
                owning key, this payload field's value or this function of the
                payload (evaluated by the caller), and at any moment one process
                owns a key and handles its calls one at a time, in the order
                sent (see docs/howto/calls.md).
            batch: For an exclusive agent: gather a key's waiting calls into one
                handling, `Batch(max_items=..., max_delay=...)`. The handler then
                takes a list of requests and returns a list of as many results;
                their answers are committed in one transaction.
            on_acquire: For an exclusive agent: `on_acquire(key, state)` runs once
                per ownership of a key by this process, before its first
                handling (after a takeover too), `state` being the key's stored
                owner state (see `shepherd.governance.lifecycle`). If it raises,
                the key is handed back and its calls wait for the next owner.
            on_release: For an exclusive agent: `on_release(key, state)` runs once
                per ownership that ends without the process dying (handed
                back, idle, moved, the roles stopping), with the owner state
                as that ownership last committed it.
            owner_idle: For an exclusive agent: seconds without a handling after
                which its owner hands a key back (running `on_release`); None
                keeps keys while the process lives.

        Raises:
            ConfigError: An option is invalid (a name or service longer than
                NAME_BYTES of UTF-8, `shepherd.core.limits`), or the handler is an
                `async def` with `threads=True`, or a plain `def` without it, or
                options would be ignored together (`batch` without `exclusive_by`,
                `service` without `breaker`): the message names the agent.
        """
        if within is not None and within <= 0:
            raise ConfigError("within", "must be a positive number of seconds")
        if service is not None and not service:
            raise ConfigError("service", "must be a non-empty name")
        if service is not None:
            checked_name("service", service)
        if isinstance(resource, str) and (
            problem := too_long("resource name", resource, NAME_BYTES)
        ):
            raise TooLongError("resource", problem)
        if resource is not None and (problem := check_name("resource", resource)) is not None:
            raise ConfigError("resource", problem)
        if exclusive_by is not None and not (
            (isinstance(exclusive_by, str) and exclusive_by) or callable(exclusive_by)
        ):
            raise ConfigError(
                "exclusive_by", "must be a payload field name or a function of the payload"
            )
        check = functools.partial(
            check_options, breaker=breaker, service=service, exclusive_by=exclusive_by, batch=batch
        )
        if name is not None:  # refused here already, before the handler is written
            check(name)

        def register(fn: F) -> F:
            agent_name = checked_name("agent", name or fn.__name__)
            check(agent_name)
            if breaker is not None:
                check_shared_breaker(self.agents, agent_name, service or agent_name, breaker)
            check_handler(agent_name, fn, threads=threads)
            idle = check_life_cycle(
                agent_name,
                exclusive=exclusive_by is not None,
                on_acquire=on_acquire,
                on_release=on_release,
                owner_idle=owner_idle,
            )
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
                on_acquire=on_acquire,
                on_release=on_release,
                owner_idle=idle,
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

    def schedule(
        self,
        name: str,
        *,
        workflow: str,
        cron: str | None = None,
        every: float | None = None,
        data: JsonValue = None,
        timezone: str = "UTC",
        catch_up: CatchUp | str = CatchUp.SKIP,
        max_catch_up: int = 10,
    ) -> Schedule:
        """Declare a schedule: its row is created when the app opens, if none has its name.

        The leading supervisor then starts `workflow` with `data` once per
        tick, cluster-wide. An existing row is never overwritten: an
        operator's change (`shepherd schedules set`, `pause`) stays, whatever
        the code declares. Declare it after its workflow.

        Args:
            name: The schedule's name (a task's key holds it and the tick).
            workflow: The registered workflow each tick starts.
            cron: A cron expression (5 fields, or 6 with seconds first), in `timezone`.
            every: Or seconds between ticks (ticks at whole multiples since the Unix epoch).
            data: Each task's input (JSON).
            timezone: The IANA zone `cron` reads its hours in.
            catch_up: What ticks missed in an outage become: `skip` (none),
                `latest` (the newest one), `all` (each, at most `max_catch_up`).
            max_catch_up: The most missed ticks `all` fires (the newest).

        Raises:
            ConfigError: A value is wrong (the field names it, the message the
                schedule), the workflow is not registered, or `name` was
                declared already with other values.
        """
        if workflow not in self.workflows:
            raise ConfigError(
                "workflow", f"schedule {name!r}: unknown workflow {workflow!r} (declare it first)"
            )
        schedule = checked_schedule(
            Schedule(
                name=name,
                workflow=workflow,
                cron=cron,
                every=every,
                data=data,
                timezone=timezone,
                catch_up=catch_up,  # type: ignore[arg-type]  # checked: a CatchUp after
                max_catch_up=max_catch_up,
            )
        )
        try:
            dumps(data)
        except ShepherdError as exc:
            raise ConfigError("data", f"schedule {name!r}: {exc}") from None
        declared = self.schedules.get(schedule.name)
        if declared is not None and declared != schedule:
            raise ConfigError("name", f"schedule {name!r} declared twice, with different values")
        self.schedules[schedule.name] = schedule
        return schedule

    async def declare_in(self, store: Store) -> None:
        """Create the declared resources and schedules `store` does not hold yet (one transaction)."""
        resources = [store.declare_resource(r) for r in self.resources.values()]
        schedules = [store.declare_schedule(s) for s in self.schedules.values()]
        await asyncio.gather(*resources, *schedules)

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
            ConfigError: A workflow names an exclusive agent as an undo
                (`ctx.call(..., undo=...)`): not supported yet; the message names
                the agent, the workflow and why.
        """
        check_wiring(self.workflows.values(), self.agents)
