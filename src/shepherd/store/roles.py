"""The store as each role sees it: role-sized slices of the `Store` contract.

A role receives only the operations it calls, so that what a role may do to
the store is read from its constructor, and a unit test drives it with a fake
of a dozen methods rather than a whole backend. Every method here is the
`Store` method of the same name, with the same signature; its docstring in
`shepherd.store.contract` is the contract. The full `Store` satisfies each of
these protocols structurally (checked by `_every_store_serves_every_role`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from shepherd.core.records import Event, JsonValue, Lease, Reply, Request, Task
from shepherd.core.states import ProcessState

if TYPE_CHECKING:
    from shepherd.core.breaker import Breaker, BreakerEvent, BreakerPolicy
    from shepherd.core.breaker import Decision as BreakerDecision
    from shepherd.core.retention import Tombstone
    from shepherd.core.supervision import Decision, Escalate, Reset
    from shepherd.core.workers import Worker
    from shepherd.store.contract import StepStart, Store
    from shepherd.store.signals import Signals

__all__ = [
    "AgentStore",
    "OperatorStore",
    "RegistryStore",
    "RetentionStore",
    "SchedulerStore",
    "SupervisorStore",
]


class SchedulerStore(Protocol):
    """What the scheduler (and its workflows' `ctx.call`) does to the store."""

    @property
    def signals(self) -> Signals: ...

    def now(self) -> datetime: ...

    async def claim_tasks(self, *, owner: str, limit: int) -> list[Task]: ...

    async def get_task(self, task_id: str) -> Task | None: ...

    async def start_step(self, start: StepStart) -> datetime: ...

    async def record_replies(self, *, owner: str, limit: int) -> list[tuple[Reply, bool]]: ...

    async def finish_task(
        self, task_id: str, *, owner: str, epoch: int, result: JsonValue
    ) -> None: ...

    async def fail_task(
        self, task_id: str, *, owner: str, epoch: int, state: ProcessState, error: JsonValue
    ) -> None: ...

    async def start_compensation(
        self, task_id: str, *, owner: str, epoch: int, error: JsonValue
    ) -> None: ...

    async def release_tasks(self, task_ids: Sequence[str], *, owner: str) -> int: ...


class AgentStore(Protocol):
    """What an agent worker (its requests, heartbeats, done keys and breakers) does."""

    @property
    def signals(self) -> Signals: ...

    def now(self) -> datetime: ...

    async def take_requests(
        self, *, agents: Sequence[str], worker: str, limit: int, suspects: int = 0
    ) -> list[Request]: ...

    async def reply_and_ack(
        self, request: Request, *, worker: str, ok: bool, body: JsonValue
    ) -> bool: ...

    async def note(self, task_id: str, kind: str, detail: JsonValue) -> None: ...

    async def extend_step(self, request: Request, *, worker: str) -> datetime | None: ...

    async def begin_once(self, key: str, *, holder: str) -> tuple[str, JsonValue]: ...

    async def finish_once(self, key: str, *, holder: str, result: JsonValue) -> bool: ...

    async def abandon_once(self, key: str, *, holder: str) -> bool: ...

    async def breaker_allow(
        self, service: str, policy: BreakerPolicy
    ) -> tuple[Breaker, BreakerDecision]: ...

    async def breaker_report(
        self, service: str, policy: BreakerPolicy, *, failed: bool
    ) -> tuple[Breaker, Breaker]: ...

    async def get_breaker(self, service: str) -> Breaker | None: ...


class RetentionStore(Protocol):
    """What a retention pass (`shepherd.supervisor.retention.purge`) deletes with."""

    async def purge_tasks(self, *, ended_before: datetime, limit: int) -> int: ...

    async def purge_tombstones(self, *, purged_before: datetime, limit: int) -> int: ...


class SupervisorStore(RetentionStore, Protocol):
    """What the supervisor (leadership, expired claims, crashes, retention) does."""

    def now(self) -> datetime: ...

    async def acquire_lease(self, name: str, *, holder: str, ttl: float) -> Lease | None: ...

    async def release_lease(self, name: str, *, holder: str) -> None: ...

    async def expired_claims(self, *, limit: int) -> list[Task]: ...

    async def apply_supervision(self, task: Task, decision: Decision, *, leader: Lease) -> bool: ...

    async def task_events(self, task_id: str) -> list[Event]: ...

    async def dead_workers(self, instances: Sequence[str], *, ttl: float) -> set[str]: ...

    async def unreaped_workers(self) -> list[Worker]: ...

    async def crash_victims(
        self, instance: str, *, beat_at: datetime
    ) -> list[tuple[Task, bool, int | None]]: ...

    async def mark_died(self, instance: str) -> bool: ...

    async def reap_worker(self, instance: str) -> None: ...

    async def apply_crash(
        self, task: Task, decision: Reset | Escalate, *, leader: Lease
    ) -> bool: ...

    async def checkpoint(self) -> None: ...


class RegistryStore(Protocol):
    """What the worker registry loop does: this process's row, beaten until it stops."""

    async def register_worker(
        self,
        instance: str,
        *,
        host: str,
        pid: int,
        roles: Sequence[str],
        agents: Sequence[str],
    ) -> Worker: ...

    async def beat_worker(self, instance: str) -> bool: ...

    async def stop_worker(self, instance: str) -> None: ...


class OperatorStore(RetentionStore, Protocol):
    """What an operator's tools read and do: look tasks up, retry, cancel, purge.

    The App's operator API (`get_task`, `list_tasks`, `history`, `retry`,
    `cancel`) and the CLI's `show`, `tasks`, `workers`, `breakers` and `purge`.
    """

    def now(self) -> datetime: ...

    async def get_task(self, task_id: str) -> Task | None: ...

    async def get_tombstone(self, task_id: str) -> Tombstone | None: ...

    async def list_tasks(
        self,
        *,
        states: Sequence[ProcessState] = (),
        limit: int = 100,
        workflow: str | None = None,
        key: str | None = None,
        id_prefix: str | None = None,
        updated_since: datetime | None = None,
    ) -> list[Task]: ...

    async def count_tasks(self) -> dict[ProcessState, int]: ...

    async def task_events(self, task_id: str) -> list[Event]: ...

    async def retry_task(
        self, task_id: str, *, seq: int | None = None, payload: JsonValue = None
    ) -> Task: ...

    async def cancel_task(self, task_id: str) -> Task: ...

    async def list_workers(self, *, since: datetime | None = None) -> list[Worker]: ...

    async def list_breakers(self) -> list[Breaker]: ...

    async def breaker_events(
        self, *, service: str | None = None, limit: int = 50
    ) -> list[BreakerEvent]: ...


if TYPE_CHECKING:

    def _every_store_serves_every_role(
        store: Store,
    ) -> tuple[SchedulerStore, AgentStore, SupervisorStore, RegistryStore, OperatorStore]:
        """A type check only: the full contract is each of the role-sized ones."""
        return (store, store, store, store, store)
