"""The store as each role sees it: role-sized views made of the store's concepts.

A role receives only the view it calls, so that what a role may do to the
store is read from its constructor. A view names the concepts whose methods it
may call (`shepherd.store.ops`: each concept's operations and the store's
methods for them); it declares no method of its own for an operation, so
adding an operation to a concept changes no view. A unit test drives a role
through a fake of its view: `write` and `read` answering a dict of handlers
by operation type, not a second backend. `shepherd.store.contract.Store` is
every view together.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from shepherd.store.ops.alerts import Alerts
from shepherd.store.ops.breakers import Breakers
from shepherd.store.ops.calls import Calls
from shepherd.store.ops.children import Children
from shepherd.store.ops.claims import Claims
from shepherd.store.ops.crashes import Crashes
from shepherd.store.ops.done_keys import DoneKeys
from shepherd.store.ops.events import Events
from shepherd.store.ops.leases import Leases
from shepherd.store.ops.owners import Owners
from shepherd.store.ops.queues import Queues
from shepherd.store.ops.rates import Rates
from shepherd.store.ops.reminders import Reminders
from shepherd.store.ops.resources import Resources
from shepherd.store.ops.retention import Retention
from shepherd.store.ops.schedules import Schedules
from shepherd.store.ops.signalling import Signalling
from shepherd.store.ops.slots import Slots
from shepherd.store.ops.steps import Steps
from shepherd.store.ops.supervision import Supervision
from shepherd.store.ops.tasks import NewTask, Submitted, Tasks
from shepherd.store.ops.workers import Workers

if TYPE_CHECKING:
    from shepherd.store.signals import Signals
    from shepherd.store.watch import StoreWatch

__all__ = [
    "AgentStore",
    "ApplicationStore",
    "CallStore",
    "Clocked",
    "OwnerStore",
    "RegistryStore",
    "ResolverStore",
    "RetentionStore",
    "SchedulerStore",
    "Signalled",
    "SupervisorStore",
]


class Clocked(ABC):
    """The store's clock, and its watch over this process's outages."""

    @abstractmethod
    def now(self) -> datetime:
        """The store's clock (the database's, where it has one)."""

    @property
    @abstractmethod
    def watch(self) -> StoreWatch:
        """Since when this process's role loops have been failing to reach the store."""

    def backlog(self) -> int:
        """Writes of this process queued for the store or in flight; 0 where not known.

        Read on the hot path (`shepherd.core.riding`): a count kept, never computed.
        """
        return 0


class Signalled(ABC):
    """Roles that wait on the store's wake-ups.

    An ABC with nothing abstract: so that it comes before `ABC` in the method
    resolution order of every view that names it.
    """

    #: Local wake-ups, rung after every commit that touched a channel.
    signals: Signals

    async def listen(self, channels: Iterable[str]) -> None:  # noqa: B027 - a default
        """Hear other processes' rings of local `channels` from now on; return once they are.

        A store whose wake-ups reach every process anyway does nothing (SQLite's
        datagrams); PostgreSQL LISTENs only to the channels its process waits on.
        """


#: What a retention pass (`shepherd.supervisor.retention.purge`) deletes with.
RetentionStore = Retention


class SchedulerStore(Claims, Steps, Children, Tasks, Signalling, Signalled, Clocked):
    """What the scheduler (and its workflows' `ctx.call`) does to the store."""


class AgentStore(Queues, Steps, Events, DoneKeys, Breakers, Slots, Rates, Signalled, Clocked):
    """What an agent worker (its requests, heartbeats, done keys, breakers and gates) does."""


class SupervisorStore(
    Leases,
    Supervision,
    Workers,
    Crashes,
    Retention,
    Schedules,
    Reminders,
    Tasks,
    Events,
    Alerts,
    Clocked,
):
    """What the supervisor (leadership, expired claims, crashes, retention, alerts, schedules,
    reminders) does."""

    @abstractmethod
    async def checkpoint(self) -> None:
        """Housekeeping outside any transaction, called about once a minute by one process.

        SQLite copies its write-ahead log into the database file and truncates
        it when no reader holds it, never waiting for one; PostgreSQL does
        nothing (its own checkpointer and autovacuum do this). Never raises for
        a checkpoint that could not run.
        """


class RegistryStore(Workers, Clocked):
    """What the worker registry loop does: this process's row, beaten until it stops."""


class ResolverStore(Resources, Signalled):
    """What a resolver reads: where an entity lives, the resources, and the mapping's version."""


class OwnerStore(Owners, Workers, Steps, Events, DoneKeys, Signalled, Clocked):
    """What an owner server does: key leases, their calls and steps, the worker registry,
    notes in a task's history (a step left without a reply), and its steps' heartbeats
    and done keys."""


class CallStore(Calls, Signalled, Clocked):
    """What callers of `app.call` and the agent processes answering them do."""


class ApplicationStore(Tasks, Events, Signalling, Signalled):
    """What the App itself does: open and close the store, submit, and follow events."""

    @abstractmethod
    async def open(self) -> None:
        """Connect and apply pending migrations. Raises StoreUnavailableError."""

    @abstractmethod
    async def close(self) -> None:
        """Finish queued writes and release connections."""

    @abstractmethod
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

    @abstractmethod
    async def submit_tasks_in(
        self, tasks: Sequence[NewTask], connection: object
    ) -> list[Submitted]:
        """`submit_tasks` inside the caller's open transaction, as `submit_task_in` does one.

        Every input is encoded before any statement is sent; the statements
        run in one savepoint, so a failure leaves the caller's transaction
        usable and none of the tasks written.
        """

    @abstractmethod
    def statistics(self) -> dict[str, float]:
        """Counters for benchmarks: batches, operations, commits."""
