from __future__ import annotations

import pytest

from shepherd.core.states import (
    CLAIMABLE_STATES,
    STEP_TRANSITIONS,
    TASK_TRANSITIONS,
    ProcessState,
    StepState,
    can_move,
    can_move_step,
)


def test_every_state_has_a_transition_row() -> None:
    assert set(TASK_TRANSITIONS) == set(ProcessState)
    assert set(STEP_TRANSITIONS) == set(StepState)


@pytest.mark.parametrize(
    "state", [ProcessState.PROCESSED, ProcessState.COMPENSATED, ProcessState.CANCELLED]
)
def test_final_states_lead_nowhere(state: ProcessState) -> None:
    assert not any(can_move(state, target) for target in ProcessState)


def test_claimable_states_can_be_claimed() -> None:
    assert can_move(ProcessState.PENDING, ProcessState.PROCESSING)
    assert all(can_move(state, ProcessState.COMPENSATING) for state in CLAIMABLE_STATES)


@pytest.mark.parametrize(
    ("current", "target", "allowed"),
    [
        (StepState.NOT_STARTED, StepState.RUNNING, True),
        (StepState.RUNNING, StepState.COMPLETED, True),
        (StepState.COMPLETED, StepState.COMPENSATED, True),
        (StepState.COMPLETED, StepState.RUNNING, False),
        (StepState.COMPENSATED, StepState.COMPLETED, False),
    ],
)
def test_step_transitions(current: StepState, target: StepState, allowed: bool) -> None:
    assert can_move_step(current, target) is allowed
