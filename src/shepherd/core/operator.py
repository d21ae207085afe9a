"""The operator's rules: which tasks may be retried or cancelled, and what that writes.

Both stores, and the task machine of `transitions`, ask these functions; the
stores turn an `OperatorEffect` into one conditional update and one event.
Every operator action also releases the task's lock, clears `complete_by`,
bumps `lock_epoch` (fencing off the old owner and any supervisor's write) and
makes the task claimable now: that part is the same for every action.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from shepherd.core.events import EventKind
from shepherd.core.states import ProcessState, StepState

if TYPE_CHECKING:
    from shepherd.core.bulk import BulkMark
    from shepherd.core.records import JsonValue

__all__ = [
    "ENDED_STATES",
    "OperatorEffect",
    "may_cancel",
    "may_retry",
    "on_cancel",
    "on_retry",
    "resubmit_refusal",
]

#: The states a task has ended in: an operator's cancel no longer applies.
ENDED_STATES: frozenset[ProcessState] = frozenset(
    {ProcessState.PROCESSED, ProcessState.COMPENSATED, ProcessState.CANCELLED}
)


@dataclass(frozen=True, slots=True, kw_only=True)
class OperatorEffect:
    """What an operator's action writes to the task, and the event that records it."""

    process_state: ProcessState
    #: Whether the task is (still) to be cancelled once compensated.
    cancel_requested: bool
    #: Whether the task's error is cleared (a retry); otherwise it is kept.
    clear_error: bool
    #: Failures restart at 0: the task gets a fresh budget.
    failure_count: int = 0
    event: EventKind
    detail: dict[str, JsonValue] = field(default_factory=dict)


def may_retry(state: str) -> bool:
    """Whether an operator may retry a task in `state`: only one in `error`."""
    return state == ProcessState.ERROR


def may_cancel(state: str) -> bool:
    """Whether an operator may cancel a task in `state`: any that has not ended."""
    return state not in ENDED_STATES


def resubmit_refusal(seq: int, step_state: str | None) -> str | None:
    """Why step `seq`, in `step_state` (None: missing), cannot be resubmitted; None if it can.

    A retry may resubmit one step of the task (with a new payload), unless it
    completed: its result is recorded and replay would not run it again.
    """
    if step_state is None:
        return f"step {seq} missing"
    if step_state == StepState.COMPLETED:
        return f"step {seq} completed"
    return None


def on_retry(
    *,
    seq: int | None,
    cancel_requested: bool,
    undoing: bool,
    by: str | None = None,
    bulk: BulkMark | None = None,
) -> OperatorEffect:
    """An operator retries a task in `error` (check `may_retry` first).

    A task that was being undone (an operator's cancel, `cancel_requested`, or
    an undo step already recorded, `undoing`) resumes its compensation; any
    other goes back to `pending` and replays from its failed step. The cancel
    request is kept; the error and the failures are forgotten. `seq` is the
    step resubmitted, if any, recorded in the event, and so is `by`, the
    operator who retries it, when given, and `bulk`, the bulk action it is
    part of (`{"bulk": id, "of": N}`), when it is one.
    """
    undo = cancel_requested or undoing
    target = ProcessState.COMPENSATING if undo else ProcessState.PENDING
    return OperatorEffect(
        process_state=target,
        cancel_requested=cancel_requested,
        clear_error=True,
        event=EventKind.RETRIED,
        detail={
            **_by({"seq": seq, "state": target.value}, by),
            **({} if bulk is None else bulk.detail()),
        },
    )


def on_cancel(*, by: str | None = None) -> OperatorEffect:
    """An operator cancels a task that has not ended (check `may_cancel` first).

    The task becomes `compensating` and is compensated, then ends `cancelled`;
    its error is kept for the record. `by`, the operator who cancels it, is
    recorded in the event when given.
    """
    return OperatorEffect(
        process_state=ProcessState.COMPENSATING,
        cancel_requested=True,
        clear_error=False,
        event=EventKind.CANCEL_REQUESTED,
        detail=_by({}, by),
    )


def _by(detail: dict[str, JsonValue], by: str | None) -> dict[str, JsonValue]:
    """`detail`, with `"by": by` when an operator's name is given."""
    return detail if by is None else {**detail, "by": by}
