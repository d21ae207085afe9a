from __future__ import annotations

import pytest

from shepherd.core import operator as rules
from shepherd.core.events import EventKind
from shepherd.core.states import ProcessState, StepState

P = ProcessState


@pytest.mark.parametrize("state", list(P))
def test_only_a_task_in_error_may_be_retried(state: ProcessState) -> None:
    assert rules.may_retry(state) is (state is P.ERROR)
    assert rules.may_retry(str(state)) is (state is P.ERROR)


@pytest.mark.parametrize("state", list(P))
def test_any_task_that_has_not_ended_may_be_cancelled(state: ProcessState) -> None:
    ended = state in (P.PROCESSED, P.COMPENSATED, P.CANCELLED)
    assert rules.may_cancel(str(state)) is not ended


def test_a_missing_or_completed_step_cannot_be_resubmitted() -> None:
    assert rules.resubmit_refusal(3, None) == "step 3 missing"
    assert rules.resubmit_refusal(3, StepState.COMPLETED) == "step 3 completed"
    for state in (StepState.NOT_STARTED, StepState.RUNNING, StepState.FAILED):
        assert rules.resubmit_refusal(3, state) is None


@pytest.mark.parametrize(
    ("cancel_requested", "undoing", "target"),
    [
        (False, False, P.PENDING),
        (True, False, P.COMPENSATING),
        (False, True, P.COMPENSATING),
        (True, True, P.COMPENSATING),
    ],
)
def test_a_retry_resumes_compensation_of_a_task_being_undone(
    cancel_requested: bool, undoing: bool, target: ProcessState
) -> None:
    effect = rules.on_retry(seq=2, cancel_requested=cancel_requested, undoing=undoing)
    assert effect.process_state is target
    assert effect.cancel_requested is cancel_requested  # kept
    assert (effect.clear_error, effect.failure_count) == (True, 0)
    assert effect.event is EventKind.RETRIED
    assert effect.detail == {"seq": 2, "state": str(target)}


def test_a_cancel_compensates_and_keeps_the_error() -> None:
    effect = rules.on_cancel()
    assert effect.process_state is P.COMPENSATING
    assert (effect.cancel_requested, effect.clear_error, effect.failure_count) == (True, False, 0)
    assert (effect.event, effect.detail) == (EventKind.CANCEL_REQUESTED, {})


def test_event_kinds_are_stored_as_their_plain_names() -> None:
    assert EventKind.STEP_GAVE_UP.value == "step_gave_up"
    assert f"{EventKind.CANCEL_REQUESTED}" == "cancel_requested"
