"""What one write to a task does: its columns, the event that records it, the requests it drops.

The owner's end of a task (`on_finish`, `on_fail`, `on_start_compensation`),
the supervisor's decision about an expired claim (`on_supervision`) and its
verdict about a crash (`on_crash`) each return a `TaskEffect`. Both stores turn
one into a single fenced UPDATE and one event; `apply_effect` is the same write
on a `Task` record, the stores' model in `transitions`. Operator actions have
their own effects, in `operator`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum, StrEnum
from typing import TYPE_CHECKING, Final, Literal, TypeVar

from shepherd.core.events import EventKind
from shepherd.core.states import TERMINAL_STATES, ProcessState
from shepherd.core.supervision import Escalate, Reset

if TYPE_CHECKING:
    from datetime import datetime

    from shepherd.core.records import JsonValue, Task
    from shepherd.core.supervision import Decision

__all__ = [
    "FAIL_STATES",
    "UNCHANGED",
    "Claim",
    "TaskEffect",
    "Unchanged",
    "apply_effect",
    "on_crash",
    "on_fail",
    "on_finish",
    "on_start_compensation",
    "on_supervision",
]

_T = TypeVar("_T")

#: The states an owner may end a task in with `on_fail`.
FAIL_STATES: frozenset[ProcessState] = frozenset(
    {ProcessState.ERROR, ProcessState.COMPENSATED, ProcessState.CANCELLED}
)


class Unchanged(Enum):
    """The type of `UNCHANGED`."""

    UNCHANGED = "unchanged"


#: A column the write leaves as it is, where None would be a value to store (JSON null).
UNCHANGED: Final = Unchanged.UNCHANGED


class Claim(StrEnum):
    """What a write does to the task's claim: `locked_by`, `lock_epoch`, `complete_by`."""

    #: Left as it is: the owner works on (it turned to compensation).
    KEPT = "kept"
    #: The owner lets go: `locked_by` and `complete_by` cleared, `lock_epoch` as it is.
    RELEASED = "released"
    #: Taken from the owner: `locked_by` and `complete_by` cleared and `lock_epoch`
    #: bumped, so that the old owner's later writes are fenced off.
    REVOKED = "revoked"


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskEffect:
    """What one write changes in a task, and the event that records it.

    Columns not named here (`input`, `key`, `cancel_requested`, ...) are left as
    they are; `updated_at` is the write's own instant.

    Attributes:
        process_state: The task's new state.
        claim: What becomes of the claim (`locked_by`, `lock_epoch`, `complete_by`).
        failure_count: The new count; None leaves it as it is.
        not_before: The new earliest claim; None leaves it as it is.
        result: The result to store, or `UNCHANGED`.
        error: The error to store, or `UNCHANGED`.
        crashes: The task's crash entries to store; None leaves them as they are.
        owner_deaths: The new count of owner deaths; None leaves it as it is.
        drop_requests: Whether the task's queued requests are deleted: nobody
            wants their replies any more.
        event: The kind of the event appended to the task's history.
        detail: The event's detail, but for the `echo` member.
        echo: A member of the event's detail that repeats the value this write
            stores in that column (`result` or `error`), to be embedded as
            stored rather than encoded again; None if there is none. See
            `event_detail`.
    """

    process_state: ProcessState
    claim: Claim
    failure_count: int | None = None
    not_before: datetime | None = None
    result: JsonValue | Unchanged = UNCHANGED
    error: JsonValue | Unchanged = UNCHANGED
    crashes: tuple[str, ...] | None = None
    owner_deaths: int | None = None
    drop_requests: bool
    event: EventKind
    detail: dict[str, JsonValue] = field(default_factory=dict)
    echo: Literal["result", "error"] | None = None

    @property
    def terminal(self) -> bool:
        """Whether the task ends here (`error` included): its own waiters are to be woken."""
        return self.process_state in TERMINAL_STATES

    def event_detail(self) -> dict[str, JsonValue]:
        """The event's whole detail: `detail`, plus the `echo` member with its value."""
        if self.echo is None:
            return dict(self.detail)
        value = self.result if self.echo == "result" else self.error
        return {**self.detail, self.echo: value}


def on_supervision(decision: Decision, *, now: datetime) -> TaskEffect:
    """The supervisor applies its decision about an expired claim.

    Every decision revokes the claim, sets `failure_count` and drops the task's
    queued requests. `Reset` makes the task claimable after `not_before`;
    `Escalate` moves it to `error`; `Compensate` moves it to `compensating`,
    claimable at once. Both record the reason as the task's error,
    `{"reason": ...}`.

    Args:
        decision: The decision of `supervision.on_expired` (or `on_store_outage`).
        now: The write's instant: when a compensated task becomes claimable.
    """
    if isinstance(decision, Reset):
        return TaskEffect(
            process_state=decision.process_state,
            claim=Claim.REVOKED,
            failure_count=decision.failure_count,
            not_before=decision.not_before,
            drop_requests=True,
            event=EventKind.RESET,
            detail={"reason": decision.reason, "failure_count": decision.failure_count},
        )
    if isinstance(decision, Escalate):
        return TaskEffect(
            process_state=ProcessState.ERROR,
            claim=Claim.REVOKED,
            failure_count=decision.failure_count,
            error={"reason": decision.reason},
            drop_requests=True,
            event=EventKind.ERROR,
            detail={"error": {"reason": decision.reason}, "failure_count": decision.failure_count},
        )
    return TaskEffect(
        process_state=ProcessState.COMPENSATING,
        claim=Claim.REVOKED,
        failure_count=decision.failure_count,
        not_before=now,
        error={"reason": decision.reason},
        drop_requests=True,
        event=EventKind.COMPENSATING,
        detail={"error": {"reason": decision.reason}},
    )


def on_crash(verdict: Reset | Escalate) -> TaskEffect:
    """The supervisor applies its verdict about a crash (`supervision.on_crash`).

    A crash is not the task's failure: `failure_count` is left as it is. The
    verdict's `crashes` and `owner_deaths` are stored, the claim is revoked and
    the task's queued requests are dropped. `Reset` makes the task claimable
    after `not_before`; `Escalate` moves it to `error`, its reason and crash
    entries recorded as the task's error.

    Args:
        verdict: The verdict; `crashes` None stores none, `owner_deaths` None stores 0.
    """
    crashes = verdict.crashes or ()
    owner_deaths = verdict.owner_deaths or 0
    if isinstance(verdict, Reset):
        return TaskEffect(
            process_state=verdict.process_state,
            claim=Claim.REVOKED,
            not_before=verdict.not_before,
            crashes=crashes,
            owner_deaths=owner_deaths,
            drop_requests=True,
            event=EventKind.RESET,
            detail={
                "reason": verdict.reason,
                "failure_count": verdict.failure_count,
                "crashes": list(crashes),
            },
        )
    return TaskEffect(
        process_state=ProcessState.ERROR,
        claim=Claim.REVOKED,
        error={"reason": verdict.reason, "crashes": list(crashes)},
        crashes=crashes,
        owner_deaths=owner_deaths,
        drop_requests=True,
        event=EventKind.ERROR,
        # The event names the reason only; the stored error lists the crashes too.
        detail={"error": {"reason": verdict.reason}, "failure_count": verdict.failure_count},
    )


def on_finish(result: JsonValue) -> TaskEffect:
    """The owner records the workflow's result: the task ends `processed`, released.

    Its queued requests are kept. The event's detail echoes the result.
    """
    return TaskEffect(
        process_state=ProcessState.PROCESSED,
        claim=Claim.RELEASED,
        result=result,
        drop_requests=False,
        event=EventKind.PROCESSED,
        echo="result",
    )


def on_fail(state: ProcessState, error: JsonValue) -> TaskEffect:
    """The owner ends the task without a result, in `state`, released.

    The error is stored and its queued requests are dropped. The event is named
    after the end state; its detail echoes the error.

    Raises:
        ValueError: `state` is not one of `FAIL_STATES`.
    """
    if state not in FAIL_STATES:
        raise ValueError(f"a task fails into error, compensated or cancelled, not {str(state)!r}")
    return TaskEffect(
        process_state=state,
        claim=Claim.RELEASED,
        error=error,
        drop_requests=True,
        event=EventKind(state.value),
        echo="error",
    )


def on_start_compensation(error: JsonValue) -> TaskEffect:
    """The owner turns to compensation: `compensating`, keeping its claim.

    `failure_count` restarts at 0: compensation has its own budget of failures.
    The error is stored; the event's detail echoes it.
    """
    return TaskEffect(
        process_state=ProcessState.COMPENSATING,
        claim=Claim.KEPT,
        failure_count=0,
        error=error,
        drop_requests=False,
        event=EventKind.COMPENSATING,
        echo="error",
    )


def apply_effect(task: Task, effect: TaskEffect, *, now: datetime) -> Task:
    """`task` after `effect`, written at `now`, as the stores write it (no checks)."""
    released = effect.claim is not Claim.KEPT
    return replace(
        task,
        process_state=effect.process_state,
        locked_by=None if released else task.locked_by,
        lock_epoch=task.lock_epoch + 1 if effect.claim is Claim.REVOKED else task.lock_epoch,
        complete_by=None if released else task.complete_by,
        failure_count=_or(effect.failure_count, task.failure_count),
        not_before=_or(effect.not_before, task.not_before),
        result=task.result if effect.result is UNCHANGED else effect.result,
        error=task.error if effect.error is UNCHANGED else effect.error,
        crashes=_or(effect.crashes, task.crashes),
        owner_deaths=_or(effect.owner_deaths, task.owner_deaths),
        updated_at=now,
    )


def _or(new: _T | None, current: _T) -> _T:
    return current if new is None else new
