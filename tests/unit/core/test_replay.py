from __future__ import annotations

import pytest

from shepherd.core.records import Step
from shepherd.core.replay import NonDeterminism, Replay, ReplayFailure, Run, decide
from shepherd.core.states import StepState


def _step(state: StepState, **changes: object) -> Step:
    fields: dict[str, object] = {
        "task_id": "t1",
        "seq": 2,
        "agent": "payments.charge",
        "state": state,
        "attempt": 3,
        "result": {"charged": 10},
        "error": {"type": "PermanentError", "message": "card declined"},
    }
    fields.update(changes)
    return Step(**fields)  # type: ignore[arg-type]


def test_no_recorded_step_runs_the_first_attempt() -> None:
    assert decide(None, "payments.charge", 2) == Run(attempt=1)


@pytest.mark.parametrize("state", [StepState.COMPLETED, StepState.COMPENSATED])
def test_a_recorded_result_is_replayed(state: StepState) -> None:
    assert decide(_step(state), "payments.charge", 2) == Replay(result={"charged": 10})


def test_a_recorded_failure_is_raised_again() -> None:
    assert decide(_step(StepState.FAILED), "payments.charge", 2) == ReplayFailure(
        error={"type": "PermanentError", "message": "card declined"}
    )


@pytest.mark.parametrize("state", [StepState.NOT_STARTED, StepState.RUNNING])
def test_an_unfinished_step_runs_the_next_attempt(state: StepState) -> None:
    assert decide(_step(state), "payments.charge", 2) == Run(attempt=4)


@pytest.mark.parametrize("state", list(StepState))
def test_another_agent_at_a_recorded_seq_is_non_determinism(state: StepState) -> None:
    assert decide(_step(state), "stock.reserve", 2) == NonDeterminism(
        seq=2, recorded="payments.charge", called="stock.reserve"
    )


def test_a_step_of_another_seq_is_refused() -> None:
    with pytest.raises(ValueError, match="seq"):
        decide(_step(StepState.COMPLETED), "payments.charge", 3)
