"""The assembly of one process's roles, from an App's registrations, settings and store.

`App.run` checks what it is asked to run (`check_roles`), then runs the
roles `Assembly` builds: each gets what it uses, no more (its slice of the store,
the settings, the clock, and the registrations, metrics and alerts it needs),
and the in-process shortcuts are wired (a step goes straight to this
process's agent worker when it has room; a reply to this process's scheduler
is recorded where it is made). Everything else goes through the store.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, final

from shepherd.agents import AgentWorker
from shepherd.agents.calls import CallServer
from shepherd.agents.owners import OwnerServer
from shepherd.agents.pools import check_pool, parse_patterns, pool_agents
from shepherd.collector import raised_threshold
from shepherd.errors import ConfigError
from shepherd.registration_checks import check_wiring
from shepherd.registry import WorkerRegistry
from shepherd.running import run_roles
from shepherd.scheduler import Scheduler
from shepherd.store import open_store
from shepherd.store import signals as ch
from shepherd.store.wakeups import CHANNELS
from shepherd.supervisor import Supervisor

if TYPE_CHECKING:
    import random

    from shepherd.agents import Agent
    from shepherd.alerts import RaiseAlert
    from shepherd.clock import Clock
    from shepherd.config import Settings
    from shepherd.core.alerts import StoredAlert
    from shepherd.core.records import CallRequest, Task
    from shepherd.governance.resolver import Resolver
    from shepherd.metrics import Metrics
    from shepherd.scheduler import Workflow
    from shepherd.store.contract import Store
    from shepherd.supervisor.resolutions import Announce
    from shepherd.watchdog import Watchdog

__all__ = [
    "ROLES",
    "Assembly",
    "Parts",
    "Role",
    "check_roles",
    "instance_id",
    "parse_patterns",
    "pool_agents",
    "served_agents",
    "store_of",
]

#: The roles a process may run, in their order.
ROLES = ("scheduler", "agent", "supervisor")

#: A role instance `Assembly.build` makes.
Role = Scheduler | AgentWorker | CallServer | OwnerServer | Supervisor


def instance_id() -> str:
    """A name for this process's role instances: host, pid and a random suffix."""
    return f"{socket.gethostname()}:{os.getpid()}:{os.urandom(2).hex()}"


def store_of(settings: Settings, clock: Clock, *, migrate: bool = True) -> Store:
    """The state store `settings` name (not opened yet), on `clock`.

    With `migrate` False it opens only an existing, current store (see `open_store`).
    """
    return open_store(
        settings.store,
        clock=clock,
        sqlite_synchronous=settings.sqlite_synchronous,
        max_payload_bytes=settings.max_payload_bytes,
        read_pool_min=settings.read_pool_min,
        read_pool_max=settings.read_pool_max,
        store_timeout=settings.store_timeout,
        migrate=migrate,
    )


def served_agents(
    roles: Sequence[str], patterns: Sequence[str] | None, registered: Iterable[str]
) -> tuple[str, ...] | None:
    """The agents a process running `roles` serves: all (None) without patterns, else those matched.

    Raises:
        ConfigError: A role is unknown, or none is given; `patterns` are given
            without the agent role, or one matches no registered agent.
    """
    unknown = [r for r in roles if r not in ROLES]
    if unknown or not roles:
        raise ConfigError("roles", f"unknown roles {unknown} (choose from {', '.join(ROLES)})")
    return check_pool(roles, patterns, registered)


def check_roles(
    roles: Sequence[str],
    patterns: Sequence[str] | None,
    *,
    workflows: Mapping[str, Workflow],
    agents: Mapping[str, Agent],
) -> tuple[str, ...] | None:
    """What `served_agents` returns, once the roles are known to be runnable here.

    Raises:
        ConfigError: As `served_agents` does; or the roles include the scheduler
            and a workflow calls an agent that is not registered (`check_wiring`).
    """
    served = served_agents(roles, patterns, agents)
    if "scheduler" in roles:
        check_wiring(workflows.values(), agents)
    return served


class Parts(Protocol):
    """What the roles are built from: an App's store, settings, clock, registrations and alerts."""

    @property
    def store(self) -> Store:
        """The state store."""

    @property
    def settings(self) -> Settings:
        """The settings."""

    @property
    def clock(self) -> Clock:
        """The clock."""

    @property
    def instance(self) -> str:
        """This process's name: roles are named after it."""

    @property
    def workflows(self) -> Mapping[str, Workflow]:
        """The registered workflows."""

    @property
    def agents(self) -> Mapping[str, Agent]:
        """The registered agents."""

    @property
    def resolver(self) -> Resolver:
        """Where entities live."""

    @property
    def metrics(self) -> Metrics:
        """This process's counters."""

    def raise_alert(self, task: Task, *, reason: str, failure_count: int | None = None) -> None:
        """How a task that ends in `error` reaches an operator."""

    def alert_call(self, call: CallRequest) -> None:
        """How a call given up reaches an operator."""

    def alert_owner(self, agent: str, key: str, failures: int, error: str) -> None:
        """How a key whose `on_acquire` keeps failing reaches an operator."""

    async def announce_resolution(self, alert: StoredAlert) -> None:
        """How a resolved alert reaches the sinks (never raises)."""


@final
class Assembly:
    """Builds and runs the role instances of one process, from `parts` (an App) as they are now."""

    def __init__(self, parts: Parts) -> None:
        self.store = parts.store
        self.settings = parts.settings
        self.clock = parts.clock
        self.instance = parts.instance
        self.workflows = parts.workflows
        self.agents = parts.agents
        self.resolver = parts.resolver
        self.metrics = parts.metrics
        self.raise_alert: RaiseAlert = parts.raise_alert
        self.alert_call: Callable[[CallRequest], None] = parts.alert_call
        self.alert_owner: Callable[[str, str, int, str], None] = parts.alert_owner
        self.announce: Announce = parts.announce_resolution

    async def run(
        self,
        roles: Sequence[str],
        *,
        agents: Iterable[str] | None,
        watchdog: Watchdog,
        ready: Callable[[], None] | None = None,
    ) -> None:
        """Run the roles (serving `agents`, all when None) and the worker registry until cancelled.

        The store must be open. `watchdog` watches the event loop meanwhile;
        the garbage collector's first threshold is raised (`gc_threshold`).
        """
        registry = self.registry(roles, agents)
        built = self.build(roles, agents=agents)
        for role in built:
            # Claims, requests, calls and keys stop while this process's beats fail.
            if not isinstance(role, Supervisor):
                role.standing = registry.standing
        # Every wake-up a role may wait on, heard before any role looks.
        await self.store.listen((*CHANNELS, ch.task_channel("")))
        watchdog.start()
        try:
            with raised_threshold(self.settings.gc_threshold):
                await run_roles([*built, registry], ready=ready)
        finally:
            watchdog.stop()

    def build(self, roles: Sequence[str], *, agents: Iterable[str] | None = None) -> list[Role]:
        """The role instances for `roles`, named after this process.

        `agents` names the agents the agent role serves (default: every one);
        the agent role serves their calls (`call`) too.
        """
        built: list[Role] = []
        scheduler = None
        if "scheduler" in roles:
            scheduler = self.scheduler()
            built.append(scheduler)
        if "agent" in roles:
            worker = self.agent_worker(agents=agents)
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
                    gates=worker.gates,
                )
            )
            owners = OwnerServer(
                self.store,
                instance=self.instance,
                agents=exclusive,
                settings=self.settings,
                clock=self.clock,
                gave_up=self.alert_call,
                failing=self.alert_owner,
                worker=worker.worker,
                gates=worker.gates,
            )
            # Replies to steps through an owner are recorded where they are made, too,
            # and steps to a key owned here go straight to its loop.
            owners.steps.recorder = scheduler
            if scheduler is not None:
                scheduler.owners = owners
            built.append(owners)
        if "supervisor" in roles:
            built.append(self.supervisor())
        return built

    def scheduler(self, *, owner: str | None = None) -> Scheduler:
        """A scheduler of the app's workflows (named after this process by default)."""
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

    def agent_worker(
        self, *, worker: str | None = None, agents: Iterable[str] | None = None
    ) -> AgentWorker:
        """An agent worker for the agents registered now (named after this process by default).

        Args:
            worker: Its name in the requests it takes.
            agents: The names of the agents it serves (default: every registered
                one); `served_agents` picks them by pattern.

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

    def supervisor(
        self, *, holder: str | None = None, rng: random.Random | None = None
    ) -> Supervisor:
        """A supervisor of the app's workflows (named after this process by default)."""
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
            announce=self.announce,
        )

    def registry(self, roles: Sequence[str], agents: Iterable[str] | None = None) -> WorkerRegistry:
        """The worker registry loop of this process, which runs `roles` (and serves `agents`)."""
        return WorkerRegistry(
            self.store,
            instance=self.instance,
            roles=roles,
            agents=self.agents if agents is None else agents,
            settings=self.settings,
            clock=self.clock,
        )
