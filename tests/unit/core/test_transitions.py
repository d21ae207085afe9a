from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from shepherd.core import transitions as tr
from shepherd.core.states import ProcessState
from shepherd.core.supervision import Compensate, Escalate, Reset
from shepherd.core.transitions import IllegalTransition, StaleEpoch

if TYPE_CHECKING:
    from collections.abc import Callable

    from shepherd.core.records import Task

    TaskFactory = Callable[..., Task]

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
LATER = NOW + timedelta(seconds=30)
#: Just past the `complete_by` of the `owned` fixture.
EXPIRED = LATER + timedelta(microseconds=1)
P = ProcessState


@pytest.fixture
def owned(task_factory: TaskFactory) -> Task:
    """A task claimed by s1 at epoch 1, expiring at NOW + 30 s."""
    return tr.claim(task_factory(), owner="s1", now=NOW, complete_within=30.0)


# claim


def test_claim_a_pending_task(task_factory: TaskFactory) -> None:
    task = tr.claim(task_factory(lock_epoch=4), owner="s1", now=NOW, complete_within=30.0)
    assert task.process_state is P.PROCESSING
    assert (task.locked_by, task.lock_epoch) == ("s1", 5)
    assert task.complete_by == NOW + timedelta(seconds=30)
    assert task.updated_at == NOW


def test_claim_a_compensating_task_keeps_its_state(task_factory: TaskFactory) -> None:
    task = tr.claim(
        task_factory(process_state=P.COMPENSATING), owner="s2", now=NOW, complete_within=5.0
    )
    assert task.process_state is P.COMPENSATING
    assert (task.locked_by, task.lock_epoch) == ("s2", 1)


@pytest.mark.parametrize("state", [P.PROCESSING, P.PROCESSED, P.ERROR, P.COMPENSATED, P.CANCELLED])
def test_only_claimable_states_are_claimed(task_factory: TaskFactory, state: ProcessState) -> None:
    with pytest.raises(IllegalTransition, match=f"{state} -> "):
        tr.claim(task_factory(process_state=state), owner="s1", now=NOW, complete_within=5.0)


def test_a_locked_task_is_not_claimed(task_factory: TaskFactory) -> None:
    task = task_factory(process_state=P.COMPENSATING, locked_by="s1")
    with pytest.raises(IllegalTransition, match="locked by 's1'"):
        tr.claim(task, owner="s2", now=NOW, complete_within=5.0)


def test_a_task_is_not_claimed_before_not_before(task_factory: TaskFactory) -> None:
    task = task_factory(not_before=LATER)
    with pytest.raises(IllegalTransition, match="not before"):
        tr.claim(task, owner="s1", now=NOW, complete_within=5.0)
    assert tr.claim(task, owner="s1", now=LATER, complete_within=5.0).locked_by == "s1"


@pytest.mark.parametrize("within", [0.0, -1.0, float("nan")])
def test_claim_needs_a_positive_window(task_factory: TaskFactory, within: float) -> None:
    with pytest.raises(ValueError, match="complete_within"):
        tr.claim(task_factory(), owner="s1", now=NOW, complete_within=within)


# fencing


def test_check_owner_accepts_the_holder(owned: Task) -> None:
    tr.check_owner(owned, owner="s1", epoch=1)


@pytest.mark.parametrize(("owner", "epoch"), [("s2", 1), ("s1", 0), ("s1", 2)])
def test_check_owner_refuses_a_stale_or_foreign_write(owned: Task, owner: str, epoch: int) -> None:
    with pytest.raises(StaleEpoch, match=f"{owner!r} at lock_epoch {epoch} is stale") as info:
        tr.check_owner(owned, owner=owner, epoch=epoch)
    assert (info.value.task_id, info.value.owner, info.value.epoch) == ("t1", owner, epoch)


def test_owner_writes_are_fenced(owned: Task) -> None:
    with pytest.raises(StaleEpoch):
        tr.finish(owned, owner="s1", epoch=0, result=1, now=NOW)
    with pytest.raises(StaleEpoch):
        tr.fail(owned, owner="s2", epoch=1, state=P.ERROR, error="x", now=NOW)
    with pytest.raises(StaleEpoch):
        tr.start_compensation(owned, owner="s1", epoch=2, error="x", now=NOW)


# finish, fail, start_compensation


def test_finish(owned: Task) -> None:
    task = tr.finish(owned, owner="s1", epoch=1, result={"ok": True}, now=LATER)
    assert task.process_state is P.PROCESSED
    assert (task.locked_by, task.lock_epoch, task.complete_by) == (None, 1, None)
    assert task.result == {"ok": True}
    assert task.updated_at == LATER


def test_finish_while_compensating_is_illegal(owned: Task) -> None:
    task = tr.start_compensation(owned, owner="s1", epoch=1, error="boom", now=NOW)
    with pytest.raises(IllegalTransition, match="compensating -> processed"):
        tr.finish(task, owner="s1", epoch=1, result=None, now=NOW)


def test_fail_to_error(owned: Task) -> None:
    task = tr.fail(owned, owner="s1", epoch=1, state=P.ERROR, error={"e": 1}, now=NOW)
    assert task.process_state is P.ERROR
    assert (task.locked_by, task.complete_by, task.error) == (None, None, {"e": 1})


@pytest.mark.parametrize("state", [P.COMPENSATED, P.CANCELLED, P.ERROR])
def test_fail_while_compensating(owned: Task, state: ProcessState) -> None:
    task = tr.start_compensation(owned, owner="s1", epoch=1, error="boom", now=NOW)
    ended = tr.fail(task, owner="s1", epoch=1, state=state, error="boom", now=NOW)
    assert ended.process_state is state
    assert ended.locked_by is None


@pytest.mark.parametrize("state", [P.COMPENSATED, P.CANCELLED])
def test_processing_cannot_skip_compensation(owned: Task, state: ProcessState) -> None:
    with pytest.raises(IllegalTransition, match=f"processing -> {state}"):
        tr.fail(owned, owner="s1", epoch=1, state=state, error="x", now=NOW)


@pytest.mark.parametrize("state", [P.PENDING, P.PROCESSING, P.PROCESSED, P.COMPENSATING])
def test_fail_only_ends_a_task(owned: Task, state: ProcessState) -> None:
    with pytest.raises(IllegalTransition, match="fail ends a task"):
        tr.fail(owned, owner="s1", epoch=1, state=state, error="x", now=NOW)


def test_start_compensation_keeps_the_lock(owned: Task) -> None:
    failing = replace(owned, failure_count=2)
    task = tr.start_compensation(failing, owner="s1", epoch=1, error="declined", now=LATER)
    assert task.process_state is P.COMPENSATING
    assert (task.locked_by, task.lock_epoch, task.complete_by) == ("s1", 1, owned.complete_by)
    assert (task.failure_count, task.error, task.updated_at) == (0, "declined", LATER)


def test_start_compensation_only_from_processing(owned: Task) -> None:
    task = tr.start_compensation(owned, owner="s1", epoch=1, error="x", now=NOW)
    with pytest.raises(IllegalTransition, match="compensating -> compensating"):
        tr.start_compensation(task, owner="s1", epoch=1, error="x", now=NOW)


# supervisor decisions


def test_apply_reset(owned: Task) -> None:
    reset = Reset(failure_count=1, not_before=LATER, process_state=P.PENDING, reason="r")
    task = tr.apply(owned, reset, now=EXPIRED)
    assert task.process_state is P.PENDING
    assert (task.locked_by, task.lock_epoch, task.complete_by) == (None, 2, None)
    assert (task.failure_count, task.not_before, task.updated_at) == (1, LATER, EXPIRED)


def test_apply_reset_of_a_compensation(owned: Task) -> None:
    compensating = tr.start_compensation(owned, owner="s1", epoch=1, error="e", now=NOW)
    reset = Reset(failure_count=1, not_before=LATER, process_state=P.COMPENSATING, reason="r")
    task = tr.apply(compensating, reset, now=EXPIRED)
    assert task.process_state is P.COMPENSATING
    assert (task.locked_by, task.lock_epoch, task.error) == (None, 2, "e")


@pytest.mark.parametrize("target", [P.COMPENSATING, P.PROCESSING, P.ERROR])
def test_apply_reset_to_the_wrong_state(owned: Task, target: ProcessState) -> None:
    reset = Reset(failure_count=1, not_before=LATER, process_state=target, reason="r")
    with pytest.raises(IllegalTransition, match="a reset leads to pending"):
        tr.apply(owned, reset, now=EXPIRED)


def test_apply_escalate(owned: Task) -> None:
    task = tr.apply(owned, Escalate(failure_count=3, reason="too slow"), now=EXPIRED)
    assert task.process_state is P.ERROR
    assert (task.locked_by, task.lock_epoch, task.failure_count) == (None, 2, 3)
    assert task.error == {"reason": "too slow"}
    assert task.not_before == owned.not_before


def test_apply_compensate(owned: Task) -> None:
    task = tr.apply(owned, Compensate(failure_count=0, reason="r"), now=EXPIRED)
    assert task.process_state is P.COMPENSATING
    assert (task.locked_by, task.lock_epoch, task.failure_count) == (None, 2, 0)
    assert (task.not_before, task.error) == (EXPIRED, {"reason": "r"})


def test_a_compensation_is_not_compensated_again(owned: Task) -> None:
    compensating = tr.start_compensation(owned, owner="s1", epoch=1, error="e", now=NOW)
    with pytest.raises(IllegalTransition, match="only a processing task"):
        tr.apply(compensating, Compensate(failure_count=0, reason="r"), now=EXPIRED)


def test_apply_needs_an_expired_claim(owned: Task, task_factory: TaskFactory) -> None:
    with pytest.raises(IllegalTransition, match="has not expired"):
        tr.apply(owned, Escalate(failure_count=1, reason="r"), now=LATER)
    with pytest.raises(IllegalTransition, match="has not expired"):
        tr.apply(task_factory(), Escalate(failure_count=1, reason="r"), now=LATER)


# operator


def test_operator_retry(owned: Task) -> None:
    failed = tr.apply(owned, Escalate(failure_count=3, reason="r"), now=EXPIRED)
    task = tr.operator_retry(failed, now=LATER + timedelta(hours=1))
    assert task.process_state is P.PENDING
    assert (task.locked_by, task.lock_epoch, task.failure_count, task.error) == (None, 3, 0, None)
    assert task.not_before == LATER + timedelta(hours=1)
    assert not task.cancel_requested


@pytest.mark.parametrize("state", [s for s in P if s is not P.ERROR])
def test_operator_retry_only_from_error(task_factory: TaskFactory, state: ProcessState) -> None:
    with pytest.raises(IllegalTransition, match=f"{state} -> pending"):
        tr.operator_retry(task_factory(process_state=state), now=NOW)


def test_operator_cancel_fences_the_owner(owned: Task) -> None:
    task = tr.operator_cancel(owned, now=LATER)
    assert task.process_state is P.COMPENSATING
    assert task.cancel_requested
    assert (task.locked_by, task.lock_epoch, task.complete_by) == (None, 2, None)
    assert (task.failure_count, task.not_before) == (0, LATER)
    with pytest.raises(StaleEpoch):
        tr.finish(task, owner="s1", epoch=1, result=None, now=LATER)


@pytest.mark.parametrize("state", [P.PENDING, P.ERROR])
def test_operator_cancel_unowned(task_factory: TaskFactory, state: ProcessState) -> None:
    task = tr.operator_cancel(task_factory(process_state=state, lock_epoch=3), now=NOW)
    assert (task.process_state, task.lock_epoch, task.cancel_requested) == (
        P.COMPENSATING,
        4,
        True,
    )


def test_operator_cancel_during_compensation_fences_the_owner(owned: Task) -> None:
    compensating = tr.start_compensation(owned, owner="s1", epoch=1, error="e", now=NOW)
    task = tr.operator_cancel(compensating, now=LATER)
    assert task.cancel_requested
    # Taken back, so that the next claim sees the request and ends the task cancelled.
    assert (task.process_state, task.locked_by, task.lock_epoch) == (P.COMPENSATING, None, 2)


@pytest.mark.parametrize("state", [P.PROCESSED, P.COMPENSATED, P.CANCELLED])
def test_an_ended_task_cannot_be_cancelled(task_factory: TaskFactory, state: ProcessState) -> None:
    with pytest.raises(IllegalTransition, match=f"{state} -> compensating"):
        tr.operator_cancel(task_factory(process_state=state), now=NOW)


def test_illegal_transition_carries_the_states(task_factory: TaskFactory) -> None:
    with pytest.raises(IllegalTransition) as info:
        tr.operator_retry(task_factory(), now=NOW)
    error = info.value
    assert (error.task_id, error.state, error.target) == ("t1", P.PENDING, P.PENDING)
    assert isinstance(error, ValueError)


def test_operator_retry_resumes_a_compensation(task_factory: TaskFactory) -> None:
    from shepherd.core.records import Step
    from shepherd.core.states import StepKind, StepState

    cancelled = task_factory(process_state=P.ERROR, cancel_requested=True)
    assert tr.operator_retry(cancelled, now=NOW).process_state is P.COMPENSATING
    undo = Step(task_id="t", seq=3, agent="u", state=StepState.FAILED, kind=StepKind.UNDO)
    undoing = task_factory(process_state=P.ERROR, steps=(undo,))
    assert tr.operator_retry(undoing, now=NOW).process_state is P.COMPENSATING
    assert (
        tr.operator_retry(task_factory(process_state=P.ERROR), now=NOW).process_state is P.PENDING
    )
