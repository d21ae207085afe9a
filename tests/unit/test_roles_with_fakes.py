"""Each role built from its parts, not from an App, and driven through a fake of its store view.

A role receives its view of the store (`shepherd.store.roles`), the settings,
a clock and what else it uses. Each fake is that view answering a dict of
handlers by operation type (`support.fake_store`), not a second backend: a
role that reached for an operation its test did not expect would not run here,
and one outside its view would not type-check.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pytest

from shepherd.agents import Agent, AgentRequest, AgentWorker
from shepherd.config import Settings
from shepherd.core.records import Event, JsonValue, Lease, Reply, Request, Task
from shepherd.core.resources import Slot
from shepherd.core.retry import RetryPolicy
from shepherd.core.schedules import StoredSchedule
from shepherd.core.states import ProcessState
from shepherd.core.supervision import (
    Decision,
    Escalate,
    Reset,
    SupervisionPolicy,
)
from shepherd.core.workers import Worker
from shepherd.errors import PermanentError, StaleEpochError
from shepherd.metrics import Metrics
from shepherd.scheduler import Scheduler, Workflow, WorkflowContext
from shepherd.store import signals as ch
from shepherd.store.contract import HeldRequest, StepStart
from shepherd.store.ops import (
    AcquireLease,
    ApplySupervision,
    ClaimTasks,
    DeadWorkers,
    ExpiredClaims,
    FailTask,
    FinishTask,
    HeldRequests,
    ListSchedules,
    NextDeadline,
    NextDue,
    NextReminder,
    PeekTasks,
    PurgeCalls,
    PurgeTasks,
    PurgeTombstones,
    RecordReplies,
    ReleaseLease,
    ReleaseTasks,
    RenewSlots,
    ReplyAndAck,
    ReplyThen,
    StartCompensation,
    StartStep,
    TakeRequests,
    TaskEvents,
    UnreapedWorkers,
    Went,
)
from shepherd.store.roles import AgentStore, RetentionStore, SchedulerStore, SupervisorStore
from shepherd.store.signals import Signals
from shepherd.store.watch import StoreWatch
from shepherd.supervisor import Supervisor
from shepherd.supervisor.retention import purge
from shepherd.testing import FakeClock, wait_until
from support.fake_store import ByOperation, Handlers

#: Seconds a test waits for what it expects before failing (a backstop, not a timing claim).
PATIENCE = 10.0


def a_task(
    clock: FakeClock,
    *,
    id: str = "t1",
    workflow: str = "order",
    complete_by: datetime | None = None,
) -> Task:
    """A task claimed by scheduler "s1", its claim good for 30 s unless told otherwise."""
    now = clock.now()
    return Task(
        id=id,
        workflow=workflow,
        key=None,
        input={"amount": 5},
        process_state=ProcessState.PROCESSING,
        locked_by="s1",
        lock_epoch=1,
        complete_by=complete_by or now + timedelta(seconds=30),
        failure_count=0,
        not_before=now,
        reply_to=None,
        created_at=now,
        updated_at=now,
    )


@dataclass
class Alerts:
    """A `raise_alert` that keeps what it was told."""

    raised: list[tuple[str, str, int | None]] = field(default_factory=list)

    def __call__(self, task: Task, *, reason: str, failure_count: int | None = None) -> None:
        self.raised.append((task.id, reason, failure_count))


# -- the scheduler -------------------------------------------------------------------
@dataclass
class FakeSchedulerStore(ByOperation, SchedulerStore):
    """A SchedulerStore: one task to claim, whose steps are answered at once."""

    clock: FakeClock
    to_claim: list[Task]
    #: The reply body each agent gives.
    answers: dict[str, JsonValue]
    signals: Signals = field(default_factory=Signals)
    started: list[StepStart] = field(default_factory=list)
    finished: dict[str, JsonValue] = field(default_factory=dict)
    done: asyncio.Event = field(default_factory=asyncio.Event)
    _replies: list[Reply] = field(default_factory=list)
    #: What next_due answers.
    due: datetime | None = None

    def now(self) -> datetime:
        return self.clock.now()

    @functools.cached_property
    def watch(self) -> StoreWatch:
        return StoreWatch(self.now)

    def handlers(self) -> Handlers:
        return {
            ClaimTasks: self.claim,
            PeekTasks: self.peek,
            ReplyThen: self.claim_then,
            NextDue: self.next_due_op,
            StartStep: self.start,
            RecordReplies: self.record,
            FinishTask: self.finish,
            FailTask: self.fail,
            StartCompensation: self.compensate,
            ReleaseTasks: self.release,
        }

    async def claim(self, op: ClaimTasks) -> list[Task]:
        claimed, self.to_claim = self.to_claim[: op.limit], self.to_claim[op.limit :]
        return claimed

    async def peek(self, op: PeekTasks) -> list[Task]:
        return self.to_claim[: op.limit]

    async def claim_then(self, op: ReplyThen) -> Went:
        """A peeked task's first write, which claims it (no reply rides here)."""
        assert op.claim is not None, "only a claim rides in this fake"
        assert not op.replies, "only a claim rides in this fake"
        assert isinstance(op.then, StartStep), "the first write of this workflow is a step"
        task_id = op.then.start.task_id
        if not any(t.id == task_id and t.lock_epoch == op.claim for t in self.to_claim):
            return Went((), StaleEpochError(task_id, op.then.start.epoch))
        self.to_claim = [t for t in self.to_claim if t.id != task_id]
        return Went((), await self.start(op.then))

    async def next_due_op(self, op: NextDue) -> datetime | None:
        return self.due

    async def start(self, op: StartStep) -> datetime:
        start = op.start
        assert start.taken_by is None, "this scheduler runs with no agent worker of its own"
        self.started.append(start)
        self._replies.append(
            Reply(
                id=len(self.started),
                task_id=start.task_id,
                seq=start.seq,
                attempt=start.attempt,
                lock_epoch=start.epoch,
                ok=True,
                body=self.answers[start.agent],
            )
        )
        self.signals.ring(ch.REPLIES)
        return self.clock.now() + timedelta(seconds=start.within)

    async def record(self, op: RecordReplies) -> list[tuple[Reply, bool]]:
        taken, self._replies = self._replies[: op.limit], self._replies[op.limit :]
        return [(reply, True) for reply in taken]

    async def finish(self, op: FinishTask) -> None:
        self.finished[op.task_id] = op.result
        self.done.set()

    async def fail(self, op: FailTask) -> None:
        raise AssertionError(f"task {op.task_id} failed: {op.state} {op.error}")

    async def compensate(self, op: StartCompensation) -> None:
        raise AssertionError(f"task {op.task_id} compensates: {op.error}")

    async def release(self, op: ReleaseTasks) -> int:
        return len(op.task_ids)


async def test_the_scheduler_runs_a_workflow_through_its_store_slice(
    fake_clock: FakeClock,
) -> None:
    async def order(ctx: WorkflowContext, data: JsonValue) -> JsonValue:
        charge = await ctx.call("pay", data)
        return {"charged": charge}

    async def pay(request: AgentRequest) -> JsonValue:
        raise AssertionError("the scheduler never runs a handler itself")

    store = FakeSchedulerStore(
        clock=fake_clock, to_claim=[a_task(fake_clock)], answers={"pay": "ch-1"}
    )
    alerts = Alerts()
    scheduler = Scheduler(
        store,
        owner="s1",
        settings=Settings(),
        clock=fake_clock,
        workflows={
            "order": Workflow(
                name="order", fn=order, complete_within=30.0, policy=SupervisionPolicy()
            )
        },
        agents={"pay": Agent(name="pay", fn=pay, retry=RetryPolicy(), within=7.0)},
        raise_alert=alerts,
    )

    running = asyncio.create_task(scheduler.run())
    try:
        await asyncio.wait_for(store.done.wait(), timeout=PATIENCE)
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)

    assert store.finished == {"t1": {"charged": "ch-1"}}
    (start,) = store.started
    assert (start.agent, start.payload, start.within, start.locked_by) == (
        "pay",
        {"amount": 5},
        7.0,
        "s1",
    )
    assert alerts.raised == []


async def test_an_idle_schedulers_wait_ends_when_the_next_task_is_due(
    fake_clock: FakeClock,
) -> None:
    store = FakeSchedulerStore(clock=fake_clock, to_claim=[], answers={})
    settings = Settings(poll_interval=0.2, idle_poll_max=2.0)
    scheduler = Scheduler(
        store,
        owner="s1",
        settings=settings,
        clock=fake_clock,
        workflows={},
        agents={},
        raise_alert=Alerts(),
    )

    assert await scheduler._until_due(2.0) == 2.0  # nothing waits
    store.due = fake_clock.now() + timedelta(seconds=0.5)
    assert await scheduler._until_due(2.0) == 0.5
    store.due = fake_clock.now() - timedelta(seconds=1)
    assert await scheduler._until_due(2.0) == 0.2  # overdue: look again soon, not at once


# -- the agent worker ----------------------------------------------------------------
@dataclass
class FakeAgentStore(ByOperation, AgentStore):
    """An AgentStore holding a queue of requests; it keeps the replies.

    Its agents use no resource, time out nowhere and mark no done key: any
    other operation (a slot, a token, a note, a heartbeat, a breaker) fails the test.
    """

    clock: FakeClock
    queue: list[Request]
    signals: Signals = field(default_factory=Signals)
    replies: dict[int, tuple[bool, JsonValue]] = field(default_factory=dict)
    done: asyncio.Event = field(default_factory=asyncio.Event)
    expected: int = 1

    def now(self) -> datetime:
        return self.clock.now()

    @functools.cached_property
    def watch(self) -> StoreWatch:
        return StoreWatch(self.now)

    def handlers(self) -> Handlers:
        return {TakeRequests: self.take, ReplyAndAck: self.reply, RenewSlots: self.renew}

    async def take(self, op: TakeRequests) -> list[Request]:
        taken = [r for r in self.queue if r.agent in op.agents][: op.limit]
        self.queue = [r for r in self.queue if r not in taken]
        return taken

    async def reply(self, op: ReplyAndAck) -> bool | Reply:
        self.replies[op.request.id] = (op.ok, op.body)
        if len(self.replies) == self.expected:
            self.done.set()
        return True

    async def renew(self, op: RenewSlots) -> list[Slot]:
        return []


def a_request(clock: FakeClock, id: int, agent: str) -> Request:
    return Request(
        id=id,
        agent=agent,
        task_id=f"t{id}",
        seq=1,
        attempt=1,
        lock_epoch=1,
        payload={"amount": 5},
        complete_by=clock.now() + timedelta(seconds=10),
        within=10.0,
    )


async def test_an_agent_worker_replies_through_its_store_slice(fake_clock: FakeClock) -> None:
    async def pay(request: AgentRequest) -> JsonValue:
        return {"paid": request.payload["amount"], "key": request.idempotency_key}

    async def refuse(request: AgentRequest) -> JsonValue:
        raise PermanentError("card declined")

    store = FakeAgentStore(
        clock=fake_clock,
        queue=[a_request(fake_clock, 1, "pay"), a_request(fake_clock, 2, "refuse")],
        expected=2,
    )
    metrics = Metrics()
    worker = AgentWorker(
        store,
        worker="a1",
        agents=[
            Agent(name="pay", fn=pay, retry=RetryPolicy()),
            Agent(name="refuse", fn=refuse, retry=RetryPolicy()),
        ],
        settings=Settings(),
        clock=fake_clock,
        metrics=metrics,
    )

    running = asyncio.create_task(worker.run())
    try:
        await asyncio.wait_for(store.done.wait(), timeout=PATIENCE)
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)

    assert store.replies[1] == (True, {"paid": 5, "key": "t1/1"})
    ok, body = store.replies[2]
    assert not ok
    assert isinstance(body, dict)
    assert body["message"] == "card declined"
    assert worker.statistics()["replied"] == 2


# -- the supervisor ------------------------------------------------------------------
@dataclass
class FakeSupervisorStore(ByOperation, SupervisorStore):
    """A SupervisorStore with expired claims to hand out; it keeps the decisions applied.

    No process dies in these tests: crash attribution's operations fail the test.
    """

    clock: FakeClock
    expired: list[Task]
    applied: dict[str, Decision] = field(default_factory=dict)
    purged: int = 0
    #: The monotonic instant of every lease renewal.
    renewals: list[float] = field(default_factory=list)

    def now(self) -> datetime:
        return self.clock.now()

    @functools.cached_property
    def watch(self) -> StoreWatch:
        return StoreWatch(self.now)

    async def checkpoint(self) -> None:
        return None

    def handlers(self) -> Handlers:
        return {
            AcquireLease: self.acquire,
            ReleaseLease: self.release,
            ExpiredClaims: self.expired_claims_op,
            NextDeadline: self.no_deadline,
            ListSchedules: self.no_schedules,
            NextReminder: self.no_reminders,
            ApplySupervision: self.apply,
            TaskEvents: self.events,
            DeadWorkers: self.dead,
            UnreapedWorkers: self.unreaped,
            HeldRequests: self.held,
            PurgeTasks: self.none_purged,
            PurgeTombstones: self.none_purged,
            PurgeCalls: self.none_purged,
        }

    async def acquire(self, op: AcquireLease) -> Lease | None:
        self.renewals.append(self.clock.monotonic())
        expires_at = self.clock.now() + timedelta(seconds=op.ttl)
        return Lease(name=op.name, holder=op.holder, epoch=1, expires_at=expires_at)

    async def release(self, op: ReleaseLease) -> None:
        return None

    async def expired_claims_op(self, op: ExpiredClaims) -> list[Task]:
        return [t for t in self.expired if t.id not in self.applied][: op.limit]

    async def no_deadline(self, op: NextDeadline) -> datetime | None:
        return None

    async def no_schedules(self, op: ListSchedules) -> list[StoredSchedule]:
        return []

    async def no_reminders(self, op: NextReminder) -> datetime | None:
        return None

    async def apply(self, op: ApplySupervision) -> bool:
        self.applied[op.task.id] = op.decision
        return True

    async def events(self, op: TaskEvents) -> list[Event]:
        return []

    async def dead(self, op: DeadWorkers) -> set[str]:
        return set()

    async def unreaped(self, op: UnreapedWorkers) -> list[Worker]:
        return []

    async def held(self, op: HeldRequests) -> list[HeldRequest]:
        return []

    async def none_purged(self, op: PurgeTasks | PurgeTombstones | PurgeCalls) -> int:
        return 0


async def test_the_supervisor_applies_its_scan_decisions_through_its_store_slice(
    fake_clock: FakeClock,
) -> None:
    async def flow(ctx: WorkflowContext, data: JsonValue) -> JsonValue:
        return None

    past = fake_clock.now() - timedelta(seconds=1)
    store = FakeSupervisorStore(
        clock=fake_clock,
        expired=[
            a_task(fake_clock, id="patient", workflow="patient", complete_by=past),
            a_task(fake_clock, id="strict", workflow="strict", complete_by=past),
        ],
    )
    alerts = Alerts()
    supervisor = Supervisor(
        store,
        holder="v1",
        instance="here:1:ab",
        settings=Settings(),
        clock=fake_clock,
        workflows={
            name: Workflow(
                name=name,
                fn=flow,
                complete_within=30.0,
                policy=SupervisionPolicy(max_failures=failures),
            )
            for name, failures in (("patient", 3), ("strict", 1))
        },
        raise_alert=alerts,
    )

    assert await supervisor.scan_once() == 2

    reset, escalated = store.applied["patient"], store.applied["strict"]
    assert isinstance(reset, Reset)
    assert reset.failure_count == 1
    assert reset.process_state is ProcessState.PENDING
    assert isinstance(escalated, Escalate)
    assert alerts.raised == [("strict", escalated.reason, 1)]
    assert (supervisor.resets, supervisor.escalations) == (1, 1)


async def test_an_idle_leader_renews_its_lease_every_third_of_its_ttl_and_no_more(
    fake_clock: FakeClock,
) -> None:
    store = FakeSupervisorStore(clock=fake_clock, expired=[])
    settings = Settings(lease_ttl=1.5, supervisor_interval=1.0)
    supervisor = Supervisor(
        store,
        holder="v1",
        instance="here:1:ab",
        settings=settings,
        clock=fake_clock,
        workflows={},
        raise_alert=Alerts(),
    )
    running = asyncio.create_task(supervisor.run())
    try:
        await wait_until(lambda: supervisor.scans == 1)
        for _ in range(60):  # 6 s of scans (every 1 s) and renewals, 0.1 s at a time
            fake_clock.advance(0.1)
            for _ in range(5):
                await asyncio.sleep(0)
        # Scans and the lease's holder both renew a stale lease; neither renews a
        # fresh one, so the renewals stay 0.5 s apart (they were three a second).
        assert supervisor.scans >= 6
        gaps = [round(b - a, 6) for a, b in itertools.pairwise(store.renewals)]
        assert gaps
        assert all(gap >= 0.5 for gap in gaps), gaps
        assert len(store.renewals) <= 13
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)


# -- a retention pass --------------------------------------------------------------
@dataclass
class FakeRetentionStore(ByOperation, RetentionStore):
    """A RetentionStore with `tasks` ended tasks and `tombstones` tombstones to delete."""

    tasks: int
    tombstones: int
    calls: list[str] = field(default_factory=list)
    expired_calls: int = 0

    def handlers(self) -> Handlers:
        return {
            PurgeTasks: self.purge_tasks_op,
            PurgeTombstones: self.purge_tombstones_op,
            PurgeCalls: self.purge_calls_op,
        }

    async def purge_tasks_op(self, op: PurgeTasks) -> int:
        self.calls.append("tasks")
        done, self.tasks = min(op.limit, self.tasks), self.tasks - min(op.limit, self.tasks)
        return done

    async def purge_tombstones_op(self, op: PurgeTombstones) -> int:
        self.calls.append("tombstones")
        done, self.tombstones = (
            min(op.limit, self.tombstones),
            self.tombstones - min(op.limit, self.tombstones),
        )
        return done

    async def purge_calls_op(self, op: PurgeCalls) -> int:
        self.calls.append("calls")
        done = min(op.limit, self.expired_calls)
        self.expired_calls -= done
        return done


@pytest.mark.parametrize(("max_batches", "complete"), [(None, True), (2, False)])
async def test_a_retention_pass_works_in_batches_through_its_store_slice(
    fake_clock: FakeClock, max_batches: int | None, complete: bool
) -> None:
    store = FakeRetentionStore(tasks=5, tombstones=1, expired_calls=3)
    now = fake_clock.now()

    done = await purge(store, ended_before=now, purged_before=now, batch=2, max_batches=max_batches)

    assert done.complete is complete
    assert (done.tasks, done.tombstones) == ((5, 1) if complete else (4, 1))
    assert done.calls == 3
    assert store.calls.count("tombstones") == 1
