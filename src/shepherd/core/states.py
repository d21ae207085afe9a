"""Task and step states, as stored, and the transitions allowed between them."""

from __future__ import annotations

from enum import StrEnum


class ProcessState(StrEnum):
    """The seed's `process_state` of a task, plus the compensation states."""

    PENDING = "pending"
    PROCESSING = "processing"
    PROCESSED = "processed"
    ERROR = "error"
    COMPENSATING = "compensating"
    COMPENSATED = "compensated"
    CANCELLED = "cancelled"


class StepState(StrEnum):
    """The state of one step (one `ctx.call`, or one compensation)."""

    NOT_STARTED = "not_started"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    COMPENSATED = "compensated"


class StepKind(StrEnum):
    """A forward step of the workflow, an undo run during compensation, or a sleep.

    A sleep step (`ctx.sleep`) calls no agent: its `complete_by` is its wake-up instant.
    """

    FORWARD = "forward"
    UNDO = "undo"
    SLEEP = "sleep"
    #: A wait for a signal (`ctx.wait_for`): running while it waits (its `complete_by` the
    #: timeout, if any), completed with the signal's payload, or failed at its timeout.
    SIGNAL = "signal"
    #: A child workflow started by this step (`ctx.run_workflow`, `core.children`).
    CHILD = "child"


#: States in which no role works on the task any more. `error` waits for an operator.
TERMINAL_STATES: frozenset[ProcessState] = frozenset(
    {
        ProcessState.PROCESSED,
        ProcessState.ERROR,
        ProcessState.COMPENSATED,
        ProcessState.CANCELLED,
    }
)

#: States a scheduler may claim (when `locked_by` is null and `not_before` has passed).
CLAIMABLE_STATES: frozenset[ProcessState] = frozenset(
    {ProcessState.PENDING, ProcessState.COMPENSATING}
)

TASK_TRANSITIONS: dict[ProcessState, frozenset[ProcessState]] = {
    ProcessState.PENDING: frozenset(
        {
            ProcessState.PROCESSING,  # claim
            ProcessState.COMPENSATING,  # operator cancel
            ProcessState.CANCELLED,  # operator cancel before anything ran
            ProcessState.ERROR,  # unknown workflow
        }
    ),
    ProcessState.PROCESSING: frozenset(
        {
            ProcessState.PROCESSED,  # workflow returned
            ProcessState.PENDING,  # supervisor reset (expired complete_by)
            ProcessState.ERROR,  # escalation, non-determinism, workflow bug
            ProcessState.COMPENSATING,  # permanent failure, supervisor or operator asks
        }
    ),
    ProcessState.COMPENSATING: frozenset(
        {
            ProcessState.COMPENSATING,  # claim / supervisor reset keep the state
            ProcessState.COMPENSATED,
            ProcessState.CANCELLED,
            ProcessState.ERROR,  # compensation cannot finish
        }
    ),
    ProcessState.ERROR: frozenset(
        {
            ProcessState.PENDING,  # operator retry
            ProcessState.COMPENSATING,  # operator cancel
        }
    ),
    ProcessState.PROCESSED: frozenset(),
    ProcessState.COMPENSATED: frozenset(),
    ProcessState.CANCELLED: frozenset(),
}

STEP_TRANSITIONS: dict[StepState, frozenset[StepState]] = {
    StepState.NOT_STARTED: frozenset({StepState.RUNNING}),
    StepState.RUNNING: frozenset(
        {StepState.RUNNING, StepState.COMPLETED, StepState.FAILED, StepState.NOT_STARTED}
    ),
    StepState.COMPLETED: frozenset({StepState.COMPENSATED}),
    StepState.FAILED: frozenset({StepState.NOT_STARTED}),  # operator retry / resubmit
    StepState.COMPENSATED: frozenset(),
}


def can_move(current: ProcessState, target: ProcessState) -> bool:
    """Whether a task may move from `current` to `target`."""
    return target in TASK_TRANSITIONS[current]


def can_move_step(current: StepState, target: StepState) -> bool:
    """Whether a step may move from `current` to `target`."""
    return target in STEP_TRANSITIONS[current]
