"""The task state machine under random interleavings of schedulers, supervisor and operator.

Several tasks, several owners. Owners write with the epoch they claimed with, or with
a wrong one; the supervisor applies its decisions under a random (but fixed) policy;
time moves forward. The invariants are the guarantees the stores must also keep.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from shepherd.core import transitions as tr
from shepherd.core.records import Task
from shepherd.core.states import CLAIMABLE_STATES, ProcessState
from shepherd.core.supervision import BackoffPolicy, SupervisionPolicy, is_expired, on_expired
from support.records import task_record

if TYPE_CHECKING:
    from collections.abc import Callable

START = datetime(2030, 1, 1, tzinfo=UTC)
TASK_IDS = ("a", "b", "c")
OWNERS = ("s1", "s2", "s3")
#: States that never change once reached (`error` waits for an operator).
FINAL = frozenset({ProcessState.PROCESSED, ProcessState.COMPENSATED, ProcessState.CANCELLED})
#: States in which a task is never owned.
UNOWNED = frozenset({ProcessState.PENDING, ProcessState.ERROR, *FINAL})

task_ids = st.sampled_from(TASK_IDS)
owners = st.sampled_from(OWNERS)
#: A writer: a named owner, or None for whoever holds the task now (else the first owner).
writers = st.none() | owners
#: The epoch of a write: None for the one the writer last claimed with, or any epoch.
epochs = st.none() | st.integers(0, 12)
#: The end state of `fail`: mostly a legal one.
fail_states = st.sampled_from(sorted(tr.FAIL_STATES)) | st.sampled_from(ProcessState)


@st.composite
def policies(draw: st.DrawFn) -> SupervisionPolicy:
    initial = draw(st.floats(0, 5))
    backoff = BackoffPolicy(
        initial=initial,
        multiplier=draw(st.floats(1, 3)),
        max_delay=initial + draw(st.floats(0, 60)),
        jitter=draw(st.floats(0, 1)),
    )
    return SupervisionPolicy(
        max_failures=draw(st.integers(1, 4)),
        on_exhausted=draw(st.sampled_from(["error", "compensate"])),
        backoff=backoff,
    )


def _new_task(task_id: str) -> Task:
    return task_record(
        id=task_id,
        key=task_id,
        input=None,
        not_before=START,
        created_at=START,
        updated_at=START,
    )


class TaskMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = START
        self.tasks = {task_id: _new_task(task_id) for task_id in TASK_IDS}
        #: The epoch each owner last claimed each task with: what it believes it holds.
        self.claims: dict[tuple[str, str], int] = {}
        self.policy = SupervisionPolicy()
        self.rng = random.Random(0)

    @initialize(policy=policies(), seed=st.integers(0, 2**32))
    def choose_policy(self, policy: SupervisionPolicy, seed: int) -> None:
        self.policy = policy
        self.rng = random.Random(seed)

    # helpers

    def _update(self, old: Task, new: Task) -> None:
        assert old.process_state not in FINAL, f"{old.process_state} task changed"
        assert new.lock_epoch >= old.lock_epoch
        assert new.id == old.id
        self.tasks[old.id] = new

    def _owner_write(
        self,
        task_id: str,
        owner: str | None,
        epoch: int | None,
        write: Callable[[Task, str, int], Task],
    ) -> None:
        """Run `write(task, owner, epoch)`: defaults as in `writers` and `epochs`."""
        old = self.tasks[task_id]
        if owner is None:
            owner = old.locked_by or OWNERS[0]
        if epoch is None:
            epoch = self.claims.get((owner, task_id), 0)
        if old.locked_by != owner or old.lock_epoch != epoch:
            with pytest.raises(tr.StaleEpoch):
                write(old, owner, epoch)
            return
        try:
            new = write(old, owner, epoch)
        except tr.IllegalTransition:
            return
        assert new.lock_epoch == old.lock_epoch
        self._update(old, new)

    # schedulers

    @rule(task_id=task_ids, owner=owners, within=st.floats(1, 20))
    def claim(self, task_id: str, owner: str, within: float) -> None:
        old = self.tasks[task_id]
        claimable = (
            old.process_state in CLAIMABLE_STATES
            and old.locked_by is None
            and old.not_before <= self.now
        )
        if not claimable:
            with pytest.raises(tr.IllegalTransition):
                tr.claim(old, owner=owner, now=self.now, complete_within=within)
            return
        new = tr.claim(old, owner=owner, now=self.now, complete_within=within)
        assert new.lock_epoch == old.lock_epoch + 1
        assert new.locked_by == owner
        self._update(old, new)
        self.claims[owner, task_id] = new.lock_epoch

    @rule(task_id=task_ids, owner=writers, epoch=epochs)
    def finish(self, task_id: str, owner: str | None, epoch: int | None) -> None:
        self._owner_write(
            task_id,
            owner,
            epoch,
            lambda task, o, e: tr.finish(task, owner=o, epoch=e, result="done", now=self.now),
        )

    @rule(task_id=task_ids, owner=writers, epoch=epochs, state=fail_states)
    def fail(self, task_id: str, owner: str | None, epoch: int | None, state: ProcessState) -> None:
        self._owner_write(
            task_id,
            owner,
            epoch,
            lambda task, o, e: tr.fail(
                task, owner=o, epoch=e, state=state, error="boom", now=self.now
            ),
        )

    @rule(task_id=task_ids, owner=writers, epoch=epochs)
    def start_compensation(self, task_id: str, owner: str | None, epoch: int | None) -> None:
        self._owner_write(
            task_id,
            owner,
            epoch,
            lambda task, o, e: tr.start_compensation(
                task, owner=o, epoch=e, error="declined", now=self.now
            ),
        )

    # time and the supervisor

    @rule(seconds=st.floats(0, 30))
    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)

    @rule(task_id=task_ids)
    def supervise(self, task_id: str) -> None:
        old = self.tasks[task_id]
        decision = on_expired(old, self.policy, now=self.now, rng=self.rng)
        if not is_expired(old, now=self.now):
            with pytest.raises(tr.IllegalTransition):
                tr.apply(old, decision, now=self.now)
            return
        new = tr.apply(old, decision, now=self.now)
        assert new.lock_epoch == old.lock_epoch + 1
        assert new.locked_by is None
        if new.process_state is not ProcessState.ERROR:
            assert new.not_before >= self.now
        self._update(old, new)

    @rule()
    def supervise_all(self) -> None:
        """A supervisor pass: every expired claim gets a decision."""
        for task_id in TASK_IDS:
            if is_expired(self.tasks[task_id], now=self.now):
                self.supervise(task_id)

    # the operator

    @rule(task_id=task_ids)
    def operator_retry(self, task_id: str) -> None:
        old = self.tasks[task_id]
        if old.process_state is not ProcessState.ERROR:
            with pytest.raises(tr.IllegalTransition):
                tr.operator_retry(old, now=self.now)
            return
        self._update(old, tr.operator_retry(old, now=self.now))

    @rule(task_id=task_ids)
    def operator_cancel(self, task_id: str) -> None:
        old = self.tasks[task_id]
        if old.process_state in FINAL:
            with pytest.raises(tr.IllegalTransition):
                tr.operator_cancel(old, now=self.now)
            return
        new = tr.operator_cancel(old, now=self.now)
        assert new.cancel_requested
        assert new.process_state is ProcessState.COMPENSATING
        self._update(old, new)

    # invariants

    @invariant()
    def locked_exactly_when_owned(self) -> None:
        for task in self.tasks.values():
            if task.process_state is ProcessState.PROCESSING:
                assert task.locked_by is not None
            if task.process_state in UNOWNED:
                assert task.locked_by is None
            assert (task.complete_by is None) == (task.locked_by is None)

    @invariant()
    def failures_stay_within_the_policy(self) -> None:
        for task in self.tasks.values():
            assert 0 <= task.failure_count <= self.policy.max_failures

    @invariant()
    def one_owner_at_most(self) -> None:
        for task_id, task in self.tasks.items():
            holders = [
                owner
                for (owner, claimed), epoch in self.claims.items()
                if claimed == task_id and task.locked_by == owner and task.lock_epoch == epoch
            ]
            assert holders == ([] if task.locked_by is None else [task.locked_by])


TaskMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestTaskMachine = TaskMachine.TestCase
