"""The store against the pure core as its model, under random interleavings.

Schedulers claim, start steps, record replies, finish, fail, compensate and
release, with their own epoch or a stale one; agents take requests and reply,
sometimes late; the supervisor expires every claim and applies the core's
decisions; an operator retries and cancels. After every step the store's
`process_state`, `locked_by`, `lock_epoch`, `failure_count`, `cancel_requested`
and step states must equal the model's, which is `shepherd.core.transitions`
plus a small model of the queues (which request an agent takes, whether its
reply is acknowledged, whether the owner records it).

Each example gets a fresh database, a FakeClock and a private event loop.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import tempfile
from collections.abc import Awaitable
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import pytest
from hypothesis import Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from shepherd.core import transitions as tr
from shepherd.core.records import Request, Task
from shepherd.core.states import TERMINAL_STATES, ProcessState, StepState
from shepherd.core.supervision import SupervisionPolicy, is_expired, on_expired
from shepherd.errors import InvalidStateError, StaleEpochError
from shepherd.store.contract import NewTask, StepStart
from shepherd.testing import FakeClock
from support.factories import SUPERVISOR_LEASE
from support.records import task_record

if TYPE_CHECKING:
    from shepherd.store.contract import Store
    from support.factories import Backend

T = TypeVar("T")

OWNERS = ("s1", "s2")
WORKERS = ("w1", "w2")
AGENT = "a"
#: Tasks not yet ended at once, and in all.
MAX_LIVE = 3
MAX_TASKS = 8
COMPLETE_WITHIN = 10.0
STEP_WITHIN = 5.0
#: Small batch limits, so that the limits are exercised too.
TAKE_LIMIT = 4
RECORD_LIMIT = 5
#: How far `supervise` moves the clock: past every claim's and request's deadline.
EXPIRE_ALL = 1000.0
#: Zero backoff, so that a reset task is claimable at once (no jitter, no guessing).
POLICIES = {
    "wf-error": SupervisionPolicy(max_failures=2, on_exhausted="error"),
    "wf-compensate": SupervisionPolicy(max_failures=2, on_exhausted="compensate"),
}

picks = st.integers(min_value=0, max_value=MAX_TASKS - 1)
owners = st.sampled_from(OWNERS)
#: Who writes: mostly None, the task's owner (the first owner if it has none), or a named one.
writers = st.sampled_from([None, None, *OWNERS])
#: Which epoch a write carries: mostly the task's, else an older one or one it never had.
epochs = st.sampled_from(["current", "current", "current", "stale", "future"])


@dataclass(slots=True)
class ModelStep:
    state: StepState
    attempt: int


@dataclass(slots=True)
class ModelRequest:
    task_id: str
    seq: int
    attempt: int
    epoch: int
    complete_by_ts: float
    taken_by: str | None = None

    def ident(self) -> tuple[str, int, int, int]:
        return (self.task_id, self.seq, self.attempt, self.epoch)


@dataclass(slots=True)
class ModelReply:
    task_id: str
    seq: int
    attempt: int
    epoch: int
    ok: bool


def _ident(request: Request) -> tuple[str, int, int, int]:
    return (request.task_id, request.seq, request.attempt, request.lock_epoch)


class StoreMachine(RuleBasedStateMachine):
    """One fresh store per example, driven alongside its model."""

    backend: ClassVar[Backend]

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.workdir = Path(tempfile.mkdtemp(prefix="shepherd-machine-"))
        self.clock = FakeClock()
        self.rng = random.Random(0)
        url = self.run(self.backend.create(self.workdir))
        self.store: Store = self.backend.connect(url, self.clock)
        self.run(self.store.open())
        self.tasks: dict[str, Task] = {}
        self.steps: dict[str, dict[int, ModelStep]] = {}
        self.requests: list[ModelRequest] = []
        self.replies: list[ModelReply] = []
        self.taken: list[tuple[Request, str]] = []

    def run(self, step: Awaitable[T]) -> T:
        return self.loop.run_until_complete(step)

    def teardown(self) -> None:
        try:
            self.run(self.store.close())
        finally:
            self.loop.close()
            shutil.rmtree(self.workdir, ignore_errors=True)

    # -- helpers -------------------------------------------------------------
    def pick(self, index: int, owner: str | None = "any") -> Task:
        """A task; for the rightful owner's writes (owner None), an owned one.

        If no task is owned, the first owner claims what it can first.
        """
        if owner is None and not self.owned():
            self.claim(OWNERS[0])
        owned = self.owned()
        candidates = owned if owner is None and owned else list(self.tasks)
        return self.tasks[candidates[index % len(candidates)]]

    def owned(self) -> list[str]:
        # Insertion order, not ids: ids are random, and hypothesis needs the same
        # choices to lead to the same states.
        return [i for i, t in self.tasks.items() if t.locked_by is not None]

    def live(self) -> int:
        return sum(t.process_state not in TERMINAL_STATES for t in self.tasks.values())

    def writer(self, task: Task, owner: str | None, epoch: str) -> tuple[str, int]:
        offset = {"current": 0, "stale": -1, "future": 1}[epoch]
        return owner or task.locked_by or OWNERS[0], task.lock_epoch + offset

    def now_ts(self) -> float:
        return self.clock.now().timestamp()

    def drop_requests(self, task_id: str, seq: int | None = None) -> None:
        self.requests = [
            r for r in self.requests if not (r.task_id == task_id and (seq is None or r.seq == seq))
        ]

    def owner_write(self, task: Task, owner: str, epoch: int, model: Any, write: Any) -> None:
        """Apply an owner's write to the model, then to the store, expecting the same outcome."""
        try:
            expected = model()
        except tr.StaleEpoch:
            try:
                self.run(write())
            except StaleEpochError:
                return
            raise AssertionError(f"{owner}@{epoch} was not fenced off from {task}") from None
        except tr.IllegalTransition:
            return  # a move the engine never makes; the store does not check states
        self.run(write())
        self.tasks[task.id] = expected

    # -- rules ---------------------------------------------------------------
    @initialize(
        workflows=st.lists(st.sampled_from(sorted(POLICIES)), min_size=1, max_size=MAX_LIVE),
        owner=owners,
    )
    def start_with_claimed_tasks(self, workflows: list[str], owner: str) -> None:
        for workflow in workflows:
            self.submit(workflow)
        self.claim(owner)

    @precondition(lambda self: self.live() < MAX_LIVE and len(self.tasks) < MAX_TASKS)
    @rule(workflow=st.sampled_from(sorted(POLICIES)))
    def submit(self, workflow: str) -> None:
        submitted = self.run(
            self.store.submit_task(
                NewTask(workflow=workflow, input=None, complete_within=COMPLETE_WITHIN)
            )
        )
        assert submitted.created
        now = self.clock.now()
        self.tasks[submitted.task_id] = task_record(
            id=submitted.task_id,
            workflow=workflow,
            input=None,
            not_before=now,
            created_at=now,
            updated_at=now,
        )
        self.steps[submitted.task_id] = {}

    @rule(owner=owners)
    def claim(self, owner: str) -> None:
        claimed = self.run(self.store.claim_tasks(locked_by=owner, limit=10))
        now = self.clock.now()
        expected = {}
        for task in self.tasks.values():
            try:
                expected[task.id] = tr.claim(
                    task, owner=owner, now=now, complete_within=COMPLETE_WITHIN
                )
            except tr.IllegalTransition:
                continue
        assert {t.id for t in claimed} == set(expected)
        self.tasks.update(expected)

    @precondition(lambda self: self.tasks)
    @rule(
        index=picks,
        owner=writers,
        epoch=epochs,
        rerun=st.booleans(),
        then=st.sampled_from(["send", "take", "answer", "record"]),
        ok=st.booleans(),
    )
    def start_step(
        self, index: int, owner: str | None, epoch: str, rerun: bool, then: str, ok: bool
    ) -> None:
        """An owner starts a step (a new one, or the next attempt of a running one).

        `then` carries the round trip on at once: an agent takes the request,
        answers it, and the owner records the answer.
        """
        task = self.pick(index, owner)
        writer, at_epoch = self.writer(task, owner, epoch)
        steps = self.steps[task.id]
        running = [seq for seq, s in steps.items() if s.state is StepState.RUNNING]
        if rerun and running:
            seq, attempt = running[0], steps[running[0]].attempt + 1
        else:
            seq, attempt = max(steps, default=0) + 1, 1
        start = StepStart(
            task_id=task.id,
            locked_by=writer,
            epoch=at_epoch,
            seq=seq,
            agent=AGENT,
            payload={"seq": seq, "attempt": attempt},
            within=STEP_WITHIN,
            attempt=attempt,
        )
        try:
            tr.check_owner(task, owner=writer, epoch=at_epoch)
        except tr.StaleEpoch:
            try:
                self.run(self.store.start_step(start))
            except StaleEpochError:
                return
            raise AssertionError(f"{writer}@{at_epoch} was not fenced off from {task}") from None
        complete_by = self.run(self.store.start_step(start))
        if attempt > 1:
            self.drop_requests(task.id, seq)
        steps[seq] = ModelStep(StepState.RUNNING, attempt)
        self.requests.append(ModelRequest(task.id, seq, attempt, at_epoch, complete_by.timestamp()))
        if task.complete_by is None or task.complete_by < complete_by:
            self.tasks[task.id] = replace(task, complete_by=complete_by)
        if then != "send":
            self.take(WORKERS[0], [ok] if then != "take" else [], record_now=then == "record")

    @rule(
        worker=st.sampled_from(WORKERS),
        answers=st.lists(st.booleans(), max_size=3),
        record_now=st.booleans(),
    )
    def take(self, worker: str, answers: list[bool], record_now: bool) -> None:
        """An agent takes the visible requests and answers the latest few (ok or not).

        With `record_now`, the owner of the oldest answer records at once.
        """
        taken = self.run(self.store.take_requests(agents=[AGENT], worker=worker, limit=TAKE_LIMIT))
        now = self.now_ts()
        visible = [r for r in self.requests if r.taken_by is None and r.complete_by_ts > now]
        visible = visible[:TAKE_LIMIT]  # the oldest first
        assert [_ident(r) for r in taken] == [r.ident() for r in visible]
        for request in visible:
            request.taken_by = worker
        self.taken += [(r, worker) for r in taken]
        for ok in answers:
            if self.taken:
                self.reply(len(self.taken) - 1, ok)
        if record_now and self.replies:
            self.record(None)

    @precondition(lambda self: self.taken)
    @rule(index=st.integers(min_value=0, max_value=20), ok=st.booleans())
    def reply(self, index: int, ok: bool) -> None:
        request, worker = self.taken.pop(index % len(self.taken))
        acked = self.run(self.store.reply_and_ack(request, worker=worker, ok=ok, body={"ok": ok}))
        now = self.now_ts()
        live = [
            r
            for r in self.requests
            if r.ident() == _ident(request) and r.taken_by == worker and r.complete_by_ts > now
        ]
        assert acked == bool(live), f"reply_and_ack({_ident(request)}) returned {acked}"
        if live:
            self.requests.remove(live[0])
            self.replies.append(
                ModelReply(request.task_id, request.seq, request.attempt, request.lock_epoch, ok)
            )

    @precondition(lambda self: self.replies)
    @rule(owner=writers)
    def record(self, owner: str | None) -> None:
        if owner is None:  # the owner of the oldest reply's task, if it has one
            owner = self.tasks[self.replies[0].task_id].locked_by or OWNERS[0]
        taken = self.run(self.store.record_replies(locked_by=owner, limit=RECORD_LIMIT))
        # The store judges every reply of the batch against the steps as they were.
        expected: list[tuple[ModelReply, bool]] = []
        mine = [r for r in self.replies if self.tasks[r.task_id].locked_by == owner]
        for reply in mine[:RECORD_LIMIT]:  # the oldest first
            step = self.steps[reply.task_id].get(reply.seq)
            current = (
                reply.epoch == self.tasks[reply.task_id].lock_epoch
                and step is not None
                and step.state is StepState.RUNNING
                and step.attempt == reply.attempt
            )
            expected.append((reply, current))
            self.replies.remove(reply)
        assert [(r.task_id, r.seq, r.attempt, r.ok, ok) for r, ok in taken] == [
            (r.task_id, r.seq, r.attempt, r.ok, current) for r, current in expected
        ]
        now = self.clock.now()
        for reply, current in expected:
            if not current:
                continue
            self.steps[reply.task_id][reply.seq].state = (
                StepState.COMPLETED if reply.ok else StepState.FAILED
            )
            self.tasks[reply.task_id] = replace(
                self.tasks[reply.task_id], complete_by=now + timedelta(seconds=COMPLETE_WITHIN)
            )

    @precondition(lambda self: self.tasks)
    @rule(index=picks, owner=writers, epoch=epochs)
    def finish(self, index: int, owner: str | None, epoch: str) -> None:
        task = self.pick(index, owner)
        writer, at = self.writer(task, owner, epoch)
        self.owner_write(
            task,
            writer,
            at,
            lambda: tr.finish(task, owner=writer, epoch=at, result={"r": 1}, now=self.clock.now()),
            lambda: self.store.finish_task(task.id, locked_by=writer, epoch=at, result={"r": 1}),
        )

    @precondition(lambda self: self.tasks)
    @rule(
        index=picks,
        owner=writers,
        epoch=epochs,
        state=st.sampled_from(sorted(tr.FAIL_STATES)),
    )
    def fail(self, index: int, owner: str | None, epoch: str, state: ProcessState) -> None:
        task = self.pick(index, owner)
        writer, at = self.writer(task, owner, epoch)
        before = self.tasks[task.id]
        self.owner_write(
            task,
            writer,
            at,
            lambda: tr.fail(
                task, owner=writer, epoch=at, state=state, error={"e": 1}, now=self.clock.now()
            ),
            lambda: self.store.fail_task(
                task.id, locked_by=writer, epoch=at, state=state, error={"e": 1}
            ),
        )
        if self.tasks[task.id] is not before:
            self.drop_requests(task.id)

    @precondition(lambda self: self.tasks)
    @rule(index=picks, owner=writers, epoch=epochs)
    def start_compensation(self, index: int, owner: str | None, epoch: str) -> None:
        task = self.pick(index, owner)
        writer, at = self.writer(task, owner, epoch)
        self.owner_write(
            task,
            writer,
            at,
            lambda: tr.start_compensation(
                task, owner=writer, epoch=at, error={"e": 1}, now=self.clock.now()
            ),
            lambda: self.store.start_compensation(
                task.id, locked_by=writer, epoch=at, error={"e": 1}
            ),
        )

    @rule(owner=owners)
    def release(self, owner: str) -> None:
        released = self.run(self.store.release_tasks(sorted(self.tasks), locked_by=owner))
        now = self.clock.now()
        mine = [t for t in self.tasks.values() if t.locked_by == owner]
        assert released == len(mine)
        for task in mine:
            state = task.process_state
            self.tasks[task.id] = replace(
                task,
                process_state=ProcessState.PENDING if state is ProcessState.PROCESSING else state,
                locked_by=None,
                lock_epoch=task.lock_epoch + 1,
                complete_by=None,
                not_before=now,
            )
            # A released task's queued requests go too: nobody wants their replies.
            self.drop_requests(task.id)

    @precondition(lambda self: any(t.locked_by for t in self.tasks.values()))
    @rule()
    def supervise(self) -> None:
        self.clock.advance(EXPIRE_ALL)
        now = self.clock.now()
        lease = self.run(self.store.acquire_lease(SUPERVISOR_LEASE, holder="sup", ttl=60.0))
        assert lease is not None
        expired = self.run(self.store.expired_claims(limit=100))
        expected = {t.id for t in self.tasks.values() if is_expired(t, now=now)}
        assert {t.id for t in expired} == expected
        for task in expired:
            decision = on_expired(task, POLICIES[task.workflow], now=now, rng=self.rng)
            model = tr.apply(self.tasks[task.id], decision, now=now)
            assert self.run(self.store.apply_supervision(task, decision, leader=lease))
            self.tasks[task.id] = model
            self.drop_requests(task.id)

    @precondition(lambda self: self.tasks)
    @rule(index=picks)
    def operator_retry(self, index: int) -> None:
        task = self.pick(index)
        try:
            expected = tr.operator_retry(task, now=self.clock.now())
        except tr.IllegalTransition:
            with pytest.raises(InvalidStateError):
                self.run(self.store.retry_task(task.id))
            return
        self.run(self.store.retry_task(task.id))
        self.tasks[task.id] = expected
        for step in self.steps[task.id].values():
            if step.state is StepState.FAILED:
                step.state = StepState.NOT_STARTED

    @precondition(lambda self: self.tasks)
    @rule(index=picks)
    def operator_cancel(self, index: int) -> None:
        task = self.pick(index)
        now = self.clock.now()
        try:
            expected = tr.operator_cancel(task, now=now)
        except tr.IllegalTransition:
            with pytest.raises(InvalidStateError):
                self.run(self.store.cancel_task(task.id))
            return
        self.run(self.store.cancel_task(task.id))
        self.tasks[task.id] = expected
        self.drop_requests(task.id)

    # -- the guarantee ---------------------------------------------------------
    @invariant()
    def store_agrees_with_the_model(self) -> None:
        for task_id, model in self.tasks.items():
            stored = self.run(self.store.get_task(task_id))
            assert stored is not None
            assert (
                stored.process_state,
                stored.locked_by,
                stored.lock_epoch,
                stored.failure_count,
                stored.cancel_requested,
            ) == (
                model.process_state,
                model.locked_by,
                model.lock_epoch,
                model.failure_count,
                model.cancel_requested,
            )
            steps = {s.seq: (s.state, s.attempt) for s in stored.steps}
            assert steps == {seq: (s.state, s.attempt) for seq, s in self.steps[task_id].items()}

    @invariant()
    def a_task_has_a_deadline_exactly_while_it_is_owned(self) -> None:
        for task_id in self.tasks:
            stored = self.run(self.store.get_task(task_id))
            assert stored is not None
            assert (stored.locked_by is None) == (stored.complete_by is None)


PHASES = tuple(Phase)
PHASES_NO_SHRINK = tuple(p for p in Phase if p is not Phase.shrink)
#: Examples per backend: a PostgreSQL example costs a cloned database and a few
#: hundred round trips (~0.4 s against SQLite's ~0.06 s), so it runs fewer.
EXAMPLES = {"sqlite": 100, "postgres": 30}


def test_the_store_behaves_like_the_core_model(backend: Backend) -> None:
    machine = type(f"{backend.name.title()}StoreMachine", (StoreMachine,), {"backend": backend})
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=EXAMPLES.get(backend.name, 100),
            stateful_step_count=40,
            deadline=None,
            database=None,
            # Each example builds a database, so shrinking takes minutes: opt in to it.
            phases=PHASES if os.environ.get("SHEPHERD_SHRINK") else PHASES_NO_SHRINK,
        ),
    )
