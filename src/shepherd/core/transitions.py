"""The task state machine, as pure functions over `Task` records.

Each function returns the new record or raises: `IllegalTransition` when the move
does not apply to the task's state, `StaleEpoch` when an owner's write is fenced
off. What a move writes is decided once, in `effects` (operator actions in
`operator`): stores execute those effects in their conditional updates, and this
module applies them to records, as their model in property tests.

Every claim and every supervisor or operator takeover bumps `lock_epoch`; an
owner's writes carry the epoch it claimed with, so a zombie owner changes nothing.
Whenever the lock is released, `complete_by` is cleared with it.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING

from shepherd.core import effects
from shepherd.core import operator as rules
from shepherd.core.effects import FAIL_STATES
from shepherd.core.states import CLAIMABLE_STATES, ProcessState, StepKind, can_move
from shepherd.core.supervision import SUPERVISED_STATES, Compensate, Escalate, Reset, is_expired

if TYPE_CHECKING:
    from collections.abc import Collection
    from datetime import datetime

    from shepherd.core.records import JsonValue, Task
    from shepherd.core.supervision import Decision

__all__ = [
    "FAIL_STATES",
    "IllegalTransition",
    "StaleEpoch",
    "apply",
    "apply_crash",
    "check_owner",
    "claim",
    "fail",
    "finish",
    "operator_cancel",
    "operator_retry",
    "start_compensation",
]


class IllegalTransition(ValueError):
    """The move does not apply to the task in its current state."""

    def __init__(self, task: Task, target: ProcessState | str, why: str = "") -> None:
        self.task_id = task.id
        self.state = task.process_state
        self.target = target
        detail = f": {why}" if why else ""
        super().__init__(
            f"task {task.id}: illegal transition {task.process_state} -> {target}{detail}"
        )


class StaleEpoch(ValueError):
    """An owner's write was fenced off: it no longer holds the task at that epoch."""

    def __init__(self, task: Task, *, owner: str, epoch: int) -> None:
        self.task_id = task.id
        self.owner = owner
        self.epoch = epoch
        super().__init__(
            f"task {task.id}: {owner!r} at lock_epoch {epoch} is stale "
            f"(locked_by={task.locked_by!r}, lock_epoch={task.lock_epoch})"
        )


def _require(
    task: Task, target: ProcessState, sources: Collection[ProcessState], why: str = ""
) -> None:
    if task.process_state not in sources or not can_move(task.process_state, target):
        raise IllegalTransition(task, target, why)


def check_owner(task: Task, *, owner: str, epoch: int) -> None:
    """Raise `StaleEpoch` unless `owner` holds `task` at `epoch` (the fencing rule)."""
    if task.lock_epoch != epoch or task.locked_by != owner:
        raise StaleEpoch(task, owner=owner, epoch=epoch)


def claim(task: Task, *, owner: str, now: datetime, complete_within: float) -> Task:
    """A scheduler takes a claimable task: it must finish or make progress by `complete_by`.

    The task must be `pending` or `compensating`, unowned, with `not_before` passed.
    A pending task becomes `processing`; a compensating one stays `compensating`.

    Raises:
        IllegalTransition: The task cannot be claimed now.
        ValueError: `complete_within` is not positive.
    """
    if not complete_within > 0:
        raise ValueError(f"complete_within must be > 0, got {complete_within!r}")
    target = (
        ProcessState.COMPENSATING
        if task.process_state is ProcessState.COMPENSATING
        else ProcessState.PROCESSING
    )
    _require(task, target, CLAIMABLE_STATES)
    if task.locked_by is not None:
        raise IllegalTransition(task, target, f"locked by {task.locked_by!r}")
    if task.not_before > now:
        raise IllegalTransition(task, target, f"not before {task.not_before.isoformat()}")
    return replace(
        task,
        process_state=target,
        locked_by=owner,
        lock_epoch=task.lock_epoch + 1,
        complete_by=now + timedelta(seconds=complete_within),
        updated_at=now,
    )


def finish(task: Task, *, owner: str, epoch: int, result: JsonValue, now: datetime) -> Task:
    """The owner records the workflow's result: `processing` -> `processed`, unlocked.

    Raises:
        StaleEpoch: `owner` does not hold the task at `epoch`.
        IllegalTransition: The task is not `processing`.
    """
    check_owner(task, owner=owner, epoch=epoch)
    _require(task, ProcessState.PROCESSED, {ProcessState.PROCESSING})
    return effects.apply_effect(task, effects.on_finish(result), now=now)


def fail(
    task: Task,
    *,
    owner: str,
    epoch: int,
    state: ProcessState,
    error: JsonValue,
    now: datetime,
) -> Task:
    """The owner ends the task without a result, in `state`, unlocked.

    `state` is `error` (from `processing` or `compensating`), or `compensated` or
    `cancelled` (from `compensating`).

    Raises:
        StaleEpoch: `owner` does not hold the task at `epoch`.
        IllegalTransition: `state` is not an end state reachable from the task's state.
    """
    check_owner(task, owner=owner, epoch=epoch)
    if state not in FAIL_STATES:
        raise IllegalTransition(task, state, "fail ends a task in error, compensated or cancelled")
    _require(task, state, {ProcessState.PROCESSING, ProcessState.COMPENSATING})
    return effects.apply_effect(task, effects.on_fail(state, error), now=now)


def start_compensation(
    task: Task, *, owner: str, epoch: int, error: JsonValue, now: datetime
) -> Task:
    """The owner turns to compensation: `processing` -> `compensating`, keeping the lock.

    `failure_count` restarts at 0: compensation has its own budget of failures.

    Raises:
        StaleEpoch: `owner` does not hold the task at `epoch`.
        IllegalTransition: The task is not `processing`.
    """
    check_owner(task, owner=owner, epoch=epoch)
    _require(task, ProcessState.COMPENSATING, {ProcessState.PROCESSING})
    return effects.apply_effect(task, effects.on_start_compensation(error), now=now)


def apply(task: Task, decision: Decision, *, now: datetime) -> Task:
    """The supervisor applies its decision about an expired claim.

    Every decision releases the lock and bumps `lock_epoch`, fencing off the old owner.
    `Reset` makes the task claimable after `not_before` (`pending`, or still
    `compensating`); `Escalate` moves it to `error`; `Compensate` moves a
    `processing` task to `compensating`, claimable at once. Both record the
    reason as the task's error, `{"reason": ...}`.

    Raises:
        IllegalTransition: The task's claim has not expired (see
            `supervision.is_expired`), or the decision does not fit its state.
    """
    effect = effects.on_supervision(decision, now=now)
    target = effect.process_state
    if isinstance(decision, Reset):
        _require_reset(task, target)
    elif isinstance(decision, Compensate) and task.process_state is not ProcessState.PROCESSING:
        raise IllegalTransition(task, target, "only a processing task is compensated")
    if not is_expired(task, now=now):
        raise IllegalTransition(task, target, "its claim has not expired")
    _require(task, target, SUPERVISED_STATES)
    return effects.apply_effect(task, effect, now=now)


def apply_crash(task: Task, verdict: Reset | Escalate, *, now: datetime) -> Task:
    """The supervisor applies its verdict about a crash (`supervision.on_crash`).

    The task must still be claimed, in a supervised state; its claim need not
    have expired. The verdict revokes the claim and records the task's crashes
    and owner deaths, leaving `failure_count` as it is: `Reset` makes the task
    claimable after `not_before` (`pending`, or still `compensating`),
    `Escalate` moves it to `error`.

    Raises:
        IllegalTransition: The task is not claimed, or the verdict does not fit its state.
    """
    effect = effects.on_crash(verdict)
    target = effect.process_state
    if isinstance(verdict, Reset):
        _require_reset(task, target)
    if task.locked_by is None:
        raise IllegalTransition(task, target, "it is not claimed")
    _require(task, target, SUPERVISED_STATES)
    return effects.apply_effect(task, effect, now=now)


def _require_reset(task: Task, target: ProcessState) -> None:
    """A reset keeps a compensating task `compensating`, and makes any other `pending`."""
    expected = (
        ProcessState.COMPENSATING
        if task.process_state is ProcessState.COMPENSATING
        else ProcessState.PENDING
    )
    if target is not expected:
        raise IllegalTransition(task, target, f"a reset leads to {expected}")


def operator_retry(task: Task, *, now: datetime) -> Task:
    """An operator retries a task in `error`: claimable now, failures forgotten.

    A task that was being undone (an operator's cancel, or an undo step already
    recorded) resumes its compensation; any other goes back to `pending` and
    replays from its failed step. An operator's cancel request is kept.

    Raises:
        IllegalTransition: The task is not in `error`.
    """
    effect = rules.on_retry(
        seq=None,
        cancel_requested=task.cancel_requested,
        undoing=any(s.kind is StepKind.UNDO for s in task.steps),
    )
    _require(task, effect.process_state, {s for s in ProcessState if rules.may_retry(s)})
    return _operator(task, effect, now=now)


def operator_cancel(task: Task, *, now: datetime) -> Task:
    """An operator cancels a task: it is compensated, then ends `cancelled`.

    The task becomes `compensating`, unowned (the old owner is fenced off, so the
    next claim sees the request even if compensation was under way) and claimable
    now, with a fresh failure budget.

    Raises:
        IllegalTransition: The task has already ended.
    """
    effect = rules.on_cancel()
    _require(task, effect.process_state, {s for s in ProcessState if rules.may_cancel(s)})
    return _operator(task, effect, now=now)


def _operator(task: Task, effect: rules.OperatorEffect, *, now: datetime) -> Task:
    """`effect` applied to `task`: unowned, fenced off, claimable now (as the stores write it)."""
    return replace(
        task,
        process_state=effect.process_state,
        locked_by=None,
        lock_epoch=task.lock_epoch + 1,
        complete_by=None,
        failure_count=effect.failure_count,
        not_before=now,
        cancel_requested=effect.cancel_requested,
        error=None if effect.clear_error else task.error,
        updated_at=now,
    )
