"""The contract's methods as operations, once for both backends.

Every method of `shepherd.store.contract.Store` that reads or writes becomes
one typed operation (`shepherd.store.ops`), run by the backend's `write`
(group commit) or `read`. A backend subclasses `Facade` and supplies those
two, plus its life cycle; it writes no method of the contract twice.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar, Unpack

from shepherd.core.calls import NO_STATE, NoState
from shepherd.core.records import Request
from shepherd.core.resources import KEEP, Keep, ResourceChange
from shepherd.errors import ConfigError
from shepherd.store import ops
from shepherd.store.alert_rows import checked_alert_id, checked_by, checked_limit
from shepherd.store.operator_facade import OperatorMethods
from shepherd.store.operator_rows import checked_actor
from shepherd.store.resource_rows import checked_change, checked_name, checked_resource
from shepherd.store.task_filters import checked_listing
from shepherd.store.watch import StoreWatch

if TYPE_CHECKING:
    from shepherd.core.alerts import StoredAlert
    from shepherd.core.breaker import Breaker, BreakerEvent, BreakerPolicy
    from shepherd.core.breaker import Decision as BreakerDecision
    from shepherd.core.ownership import KeyLease, TakenKey
    from shepherd.core.records import (
        CallAnswer,
        CallRequest,
        Event,
        JsonValue,
        Lease,
        QueueDepth,
        Reply,
        Task,
    )
    from shepherd.core.resources import Partition, Resolution, Resource, Slot, SlotLease
    from shepherd.core.retention import Tombstone
    from shepherd.core.states import ProcessState
    from shepherd.core.supervision import Decision, Escalate, Reset
    from shepherd.core.workers import Worker
    from shepherd.store.contract import HeldRequest, NewTask, StepStart, Submitted
    from shepherd.store.ops import TaskFilters
    from shepherd.store.signals import Signals

__all__ = ["Facade"]

R = TypeVar("R")


class Facade(OperatorMethods, ABC):
    """The store contract, each method one operation for the backend to run."""

    signals: Signals

    #: Seconds one round trip may take (the backend's `store_timeout`).
    store_timeout: float = 5.0

    @functools.cached_property
    def watch(self) -> StoreWatch:
        """Since when this process's role loops have been failing to reach the store."""
        return StoreWatch(self.now, lead=self.store_timeout)

    def write(self, op: ops.Write[R]) -> Awaitable[R]:
        """Run `op` in the next group-commit transaction; its outcome once durable.

        Not a coroutine function itself: it hands back the backend's awaitable
        (`queue`), so a write costs no extra frame on the hot path; a store not
        yet open is opened first.
        """
        queued = self.queue(op)
        return self._open_then_write(op) if queued is None else queued

    async def _open_then_write(self, op: ops.Write[R]) -> R:
        await self.open()
        queued = self.queue(op)
        if queued is None:  # closed again meanwhile
            raise self.closed_error()
        return await queued

    # -- what a backend supplies ------------------------------------------
    @abstractmethod
    def queue(self, op: ops.Write[R]) -> Awaitable[R] | None:
        """Queue `op` for the next group commit; None if the store is not open."""

    @abstractmethod
    def closed_error(self) -> Exception:
        """The error a caller of a closed store gets."""

    @abstractmethod
    async def read(self, op: ops.Read[R]) -> R:
        """Run `op` on a read connection."""

    @abstractmethod
    async def open(self) -> None: ...

    @abstractmethod
    async def close(self) -> None: ...

    @abstractmethod
    def now(self) -> datetime: ...

    @abstractmethod
    def statistics(self) -> dict[str, float]: ...

    @abstractmethod
    async def checkpoint(self) -> None: ...

    # -- application -------------------------------------------------------
    async def submit_task(self, task: NewTask) -> Submitted:
        return await self.write(ops.SubmitTask(task=task))

    async def submit_tasks(self, tasks: Sequence[NewTask]) -> list[Submitted]:
        if not tasks:
            return []
        return await self.write(ops.SubmitTasks(tasks=tuple(tasks)))

    # A backend that can join a caller's transaction (PostgreSQL) overrides these two.
    async def submit_task_in(self, task: NewTask, connection: object) -> Submitted:
        raise self._cannot_join()

    async def submit_tasks_in(
        self, tasks: Sequence[NewTask], connection: object
    ) -> list[Submitted]:
        raise self._cannot_join()

    def _cannot_join(self) -> ConfigError:
        return ConfigError(
            "connection",
            "transactional submit (connection=...) needs the PostgreSQL store; "
            f"{type(self).__name__} cannot join a caller's transaction",
        )

    async def get_task(self, task_id: str) -> Task | None:
        return await self.read(ops.GetTask(task_id=task_id))

    async def list_tasks(self, *, limit: int = 100, **filters: Unpack[TaskFilters]) -> list[Task]:
        return await self.read(checked_listing(ops.ListTasks(limit=limit, **filters)))

    async def count_tasks(self) -> dict[ProcessState, int]:
        return await self.read(ops.CountTasks())

    async def count_workflow_tasks(self, workflow: str) -> dict[ProcessState, int]:
        return await self.read(ops.CountWorkflowTasks(workflow=workflow))

    async def queue_depths(self) -> list[QueueDepth]:
        return await self.read(ops.QueueDepths())

    async def count_tasks_in(self, states: Sequence[ProcessState]) -> dict[ProcessState, int]:
        return await self.read(ops.CountTasksIn(states=tuple(states)))

    async def task_events(self, task_id: str) -> list[Event]:
        return await self.read(ops.TaskEvents(task_id=task_id))

    async def read_events(
        self, *, reply_to: str | None, after_id: int, limit: int = 1000
    ) -> list[Event]:
        return await self.read(ops.ReadEvents(reply_to=reply_to, after_id=after_id, limit=limit))

    # -- scheduler ---------------------------------------------------------
    async def next_due(self) -> datetime | None:
        return await self.read(ops.NextDue())

    async def claim_tasks(self, *, owner: str, limit: int) -> list[Task]:
        return await self.write(ops.ClaimTasks(owner=owner, limit=limit))

    async def start_step(self, start: StepStart) -> datetime:
        started = await self.write(ops.StartStep(start=start))
        assert isinstance(started, datetime), "start_step with taken_by: use start_step_taken"
        return started

    async def start_step_taken(self, start: StepStart, *, worker: str) -> Request:
        started = await self.write(ops.StartStep(start=replace(start, taken_by=worker)))
        assert isinstance(started, Request)
        return started

    async def record_replies(self, *, owner: str, limit: int) -> list[tuple[Reply, bool]]:
        return await self.write(ops.RecordReplies(owner=owner, limit=limit))

    async def finish_task(self, task_id: str, *, owner: str, epoch: int, result: JsonValue) -> None:
        await self.write(ops.FinishTask(task_id=task_id, owner=owner, epoch=epoch, result=result))

    async def fail_task(
        self, task_id: str, *, owner: str, epoch: int, state: ProcessState, error: JsonValue
    ) -> None:
        await self.write(
            ops.FailTask(task_id=task_id, owner=owner, epoch=epoch, state=state, error=error)
        )

    async def start_compensation(
        self, task_id: str, *, owner: str, epoch: int, error: JsonValue
    ) -> None:
        await self.write(
            ops.StartCompensation(task_id=task_id, owner=owner, epoch=epoch, error=error)
        )

    async def release_tasks(self, task_ids: Sequence[str], *, owner: str) -> int:
        return await self.write(ops.ReleaseTasks(task_ids=tuple(task_ids), owner=owner))

    # -- agent -------------------------------------------------------------
    async def take_requests(
        self, *, agents: Sequence[str], worker: str, limit: int, suspects: int = 0
    ) -> list[Request]:
        return await self.write(
            ops.TakeRequests(agents=tuple(agents), worker=worker, limit=limit, suspects=suspects)
        )

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
        return await self.write(
            ops.ReplyAndAck(
                request=request,
                worker=worker,
                ok=ok,
                body=body,
                slot=slot,
                recorder=recorder,
                trace=trace,
            )
        )

    async def acquire_slots(
        self, resource: str, holders: Sequence[str], *, worker: str, lease: float
    ) -> tuple[list[str], int | None]:
        return await self.write(
            ops.AcquireSlots(resource=resource, holders=tuple(holders), worker=worker, lease=lease)
        )

    async def renew_slots(self, *, worker: str, lease: float) -> list[Slot]:
        return await self.write(ops.RenewSlots(worker=worker, lease=lease))

    async def release_slots(self, slots: Sequence[Slot]) -> int:
        return await self.write(ops.ReleaseSlots(slots=tuple(slots)))

    async def list_slots(self, resource: str | None = None) -> list[SlotLease]:
        return await self.read(ops.ListSlots(resource=resource))

    async def take_keys(
        self, agent: str, keys: Sequence[str], *, owner: str, lease: float
    ) -> list[TakenKey]:
        return await self.write(
            ops.TakeKeys(agent=agent, keys=tuple(keys), owner=owner, lease=lease)
        )

    async def renew_keys(self, *, owner: str, lease: float) -> list[KeyLease]:
        return await self.write(ops.RenewKeys(owner=owner, lease=lease))

    async def release_keys(self, agent: str, keys: Sequence[str], *, owner: str) -> int:
        return await self.write(ops.ReleaseKeys(agent=agent, keys=tuple(keys), owner=owner))

    async def set_owner_state(
        self, agent: str, key: str, *, owner: str, epoch: int, state: JsonValue
    ) -> bool:
        return await self.write(
            ops.SetOwnerState(agent=agent, key=key, owner=owner, epoch=epoch, state=state)
        )

    async def list_key_leases(self, agent: str) -> list[KeyLease]:
        return await self.read(ops.ListKeyLeases(agent=agent))

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
        await self.write(
            ops.SendCall(
                call_id=call_id,
                agent=agent,
                payload=payload,
                within=within,
                max_attempts=max_attempts,
                expires_in=expires_in,
                owner_key=owner_key,
            )
        )

    async def key_backlogs(self, agent: str) -> dict[str, tuple[int, datetime]]:
        return await self.read(ops.KeyBacklogs(agent=agent))

    async def key_backlog(self, agent: str, key: str) -> tuple[int, datetime | None]:
        return await self.read(ops.KeyBacklog(agent=agent, key=key))

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
        answer = _answer_owned(agent, key, owner, epoch, answers, state)
        return await self.write(
            ops.AnswerAndTake(answer=answer, max_items=max_items, max_delay=max_delay)
        )

    async def waiting_keys(self, agent: str) -> list[str]:
        return await self.read(ops.WaitingKeys(agent=agent))

    async def take_key_calls(
        self, agent: str, key: str, *, owner: str, epoch: int, limit: int
    ) -> tuple[list[CallRequest], list[CallRequest]]:
        return await self.write(
            ops.TakeKeyCalls(agent=agent, key=key, owner=owner, epoch=epoch, limit=limit)
        )

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
        return await self.write(_answer_owned(agent, key, owner, epoch, answers, state))

    async def take_calls(
        self, *, worker: str, agents: Sequence[str], limit: int
    ) -> tuple[list[CallRequest], list[CallRequest]]:
        return await self.write(ops.TakeCalls(worker=worker, agents=tuple(agents), limit=limit))

    async def answer_call(
        self, call_id: str, *, worker: str, attempt: int, ok: bool, body: JsonValue
    ) -> bool:
        return await self.write(
            ops.AnswerCall(call_id=call_id, worker=worker, attempt=attempt, ok=ok, body=body)
        )

    async def get_answers(self, call_ids: Sequence[str]) -> dict[str, CallAnswer]:
        return await self.read(ops.GetAnswers(call_ids=tuple(call_ids)))

    async def purge_calls(self, *, limit: int) -> int:
        return await self.write(ops.PurgeCalls(limit=limit))

    async def take_tokens(self, resource: str, *, want: int) -> tuple[int, float | None, float]:
        return await self.write(ops.TakeTokens(resource=resource, want=want))

    async def note(self, task_id: str, kind: str, detail: JsonValue) -> None:
        await self.write(ops.Note(task_id=task_id, kind=kind, detail=detail))

    async def extend_step(self, request: Request, *, worker: str) -> datetime | None:
        return await self.write(ops.ExtendStep(request=request, worker=worker))

    async def begin_once(self, key: str, *, holder: str) -> tuple[str, JsonValue]:
        return await self.write(ops.BeginOnce(key=key, holder=holder))

    async def finish_once(self, key: str, *, holder: str, result: JsonValue) -> bool:
        return await self.write(ops.FinishOnce(key=key, holder=holder, result=result))

    async def abandon_once(self, key: str, *, holder: str) -> bool:
        return await self.write(ops.AbandonOnce(key=key, holder=holder))

    # -- agent: circuit breakers -------------------------------------------
    async def breaker_allow(
        self, service: str, policy: BreakerPolicy
    ) -> tuple[Breaker, BreakerDecision]:
        return await self.write(ops.BreakerAllow(service=service, policy=policy))

    async def breaker_report(
        self, service: str, policy: BreakerPolicy, *, failed: bool
    ) -> tuple[Breaker, Breaker]:
        return await self.write(ops.BreakerReport(service=service, policy=policy, failed=failed))

    async def get_breaker(self, service: str) -> Breaker | None:
        return await self.read(ops.GetBreaker(service=service))

    async def list_breakers(self) -> list[Breaker]:
        return await self.read(ops.ListBreakers())

    async def breaker_events(
        self, *, service: str | None = None, limit: int = 50
    ) -> list[BreakerEvent]:
        return await self.read(ops.BreakerEvents(service=service, limit=limit))

    # -- supervisor --------------------------------------------------------
    async def acquire_lease(self, name: str, *, holder: str, ttl: float) -> Lease | None:
        return await self.write(ops.AcquireLease(name=name, holder=holder, ttl=ttl))

    async def release_lease(self, name: str, *, holder: str) -> None:
        await self.write(ops.ReleaseLease(name=name, holder=holder))

    async def expired_claims(self, *, limit: int) -> list[Task]:
        return await self.read(ops.ExpiredClaims(limit=limit))

    async def apply_supervision(self, task: Task, decision: Decision, *, leader: Lease) -> bool:
        return await self.write(ops.ApplySupervision(task=task, decision=decision, leader=leader))

    # -- worker registry ---------------------------------------------------
    async def register_worker(
        self, instance: str, *, host: str, pid: int, roles: Sequence[str], agents: Sequence[str]
    ) -> Worker:
        return await self.write(
            ops.RegisterWorker(
                instance=instance, host=host, pid=pid, roles=tuple(roles), agents=tuple(agents)
            )
        )

    async def beat_worker(self, instance: str) -> bool:
        return await self.write(ops.BeatWorker(instance=instance))

    async def stop_worker(self, instance: str) -> None:
        await self.write(ops.StopWorker(instance=instance))

    async def list_workers(self, *, since: datetime | None = None) -> list[Worker]:
        return await self.read(ops.ListWorkers(since=since))

    async def dead_workers(self, instances: Sequence[str], *, ttl: float) -> set[str]:
        if not instances:
            return set()
        return await self.read(ops.DeadWorkers(instances=tuple(instances), ttl=ttl))

    # -- supervisor: crash attribution --------------------------------------
    async def unreaped_workers(self) -> list[Worker]:
        return await self.read(ops.UnreapedWorkers())

    async def crash_victims(
        self, instance: str, *, beat_at: datetime
    ) -> list[tuple[Task, bool, int | None]]:
        return await self.read(ops.CrashVictims(instance=instance, beat_at=beat_at))

    async def held_requests(self, task_ids: Sequence[str]) -> list[HeldRequest]:
        if not task_ids:
            return []
        return await self.read(ops.HeldRequests(task_ids=tuple(task_ids)))

    async def mark_died(self, instance: str) -> bool:
        return await self.write(ops.MarkDied(instance=instance))

    async def reap_worker(self, instance: str) -> None:
        await self.write(ops.ReapWorker(instance=instance))

    async def apply_crash(self, task: Task, decision: Reset | Escalate, *, leader: Lease) -> bool:
        return await self.write(ops.ApplyCrash(task=task, decision=decision, leader=leader))

    # -- retention ---------------------------------------------------------
    async def purge_tasks(self, *, ended_before: datetime, limit: int) -> int:
        return await self.write(ops.PurgeTasks(ended_before=ended_before, limit=limit))

    async def purge_tombstones(self, *, purged_before: datetime, limit: int) -> int:
        return await self.write(ops.PurgeTombstones(purged_before=purged_before, limit=limit))

    async def get_tombstone(self, task_id: str) -> Tombstone | None:
        return await self.read(ops.GetTombstone(task_id=task_id))

    # -- operator ----------------------------------------------------------
    async def retry_task(
        self,
        task_id: str,
        *,
        seq: int | None = None,
        payload: JsonValue = None,
        by: str | None = None,
    ) -> Task:
        return await self.write(
            ops.RetryTask(task_id=task_id, seq=seq, payload=payload, by=checked_actor(by))
        )

    async def cancel_task(self, task_id: str, *, by: str | None = None) -> Task:
        return await self.write(ops.CancelTask(task_id=task_id, by=checked_actor(by)))

    # -- resource governance (inputs checked before anything is queued) -----
    async def declare_resource(self, resource: Resource) -> bool:
        return await self.write(ops.DeclareResource(resource=checked_resource(resource)))

    async def add_resource(self, resource: Resource) -> Resource:
        return await self.write(ops.AddResource(resource=checked_resource(resource)))

    async def set_resource(
        self,
        name: str,
        *,
        kind: str | Keep = KEEP,
        info: dict[str, JsonValue] | Keep = KEEP,
        capacity: int | Keep | None = KEEP,
        rate: float | Keep | None = KEEP,
    ) -> Resource:
        change = ResourceChange(kind=kind, info=info, capacity=capacity, rate=rate)
        return await self.write(ops.SetResource(name=name, change=checked_change(name, change)))

    async def remove_resource(self, name: str) -> Resource:
        return await self.write(ops.RemoveResource(name=checked_name("resource", name)))

    async def list_resources(self) -> list[Resource]:
        return await self.read(ops.ListResources())

    async def move_partition(self, partition: str, resource: str) -> tuple[Partition, str | None]:
        return await self.write(
            ops.MovePartition(
                partition=checked_name("partition", partition),
                resource=checked_name("resource", resource),
            )
        )

    async def assign_entity(self, entity: str, partition: str) -> str | None:
        return await self.write(
            ops.AssignEntity(
                entity=checked_name("entity", entity),
                partition=checked_name("partition", partition),
            )
        )

    async def unassign_entity(self, entity: str) -> str | None:
        return await self.write(ops.UnassignEntity(entity=checked_name("entity", entity)))

    async def list_partitions(self) -> list[Partition]:
        return await self.read(ops.ListPartitions())

    async def resolve(
        self, entity: str, *, default_partition: str | None = None
    ) -> tuple[Resolution | None, int]:
        default = (
            None if default_partition is None else checked_name("partition", default_partition)
        )
        return await self.read(
            ops.Resolve(entity=checked_name("entity", entity), default_partition=default)
        )

    async def resolver_version(self) -> int:
        return await self.read(ops.ResolverVersion())

    # -- operator alerts (inputs checked before anything is queued) ---------
    async def list_alerts(
        self, *, open_only: bool = False, limit: int = 100, task_id: str | None = None
    ) -> list[StoredAlert]:
        return await self.read(
            ops.ListAlerts(open_only=open_only, limit=checked_limit(limit), task_id=task_id)
        )

    async def acknowledge_alert(self, alert_id: int, *, by: str) -> StoredAlert:
        return await self.write(
            ops.AcknowledgeAlert(alert_id=checked_alert_id(alert_id), by=checked_by(by))
        )


def _answer_owned(
    agent: str,
    key: str,
    owner: str,
    epoch: int,
    answers: Sequence[tuple[str, int, bool, JsonValue]],
    state: JsonValue | NoState,
) -> ops.AnswerOwned:
    """The operation that answers calls of one key and sets (or keeps) its owner state."""
    return ops.AnswerOwned(
        agent=agent,
        key=key,
        owner=owner,
        epoch=epoch,
        answers=tuple(answers),
        set_state=not isinstance(state, NoState),
        state=None if isinstance(state, NoState) else state,
    )
