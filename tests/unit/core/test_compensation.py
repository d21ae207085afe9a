from __future__ import annotations

from dataclasses import replace

import pytest

from shepherd.core.compensation import UndoStep, plan
from shepherd.core.records import Step
from shepherd.core.states import StepKind, StepState


def _step(seq: int, state: StepState, undo: str | None = "undo", **changes: object) -> Step:
    return Step(
        task_id="t1",
        seq=seq,
        agent=f"agent{seq}",
        state=state,
        undo=undo,
        request={"n": seq},
        result={"r": seq} if state is StepState.COMPLETED else None,
        **changes,  # type: ignore[arg-type]
    )


def test_no_steps_no_plan() -> None:
    assert plan([]) == []


def test_undoes_completed_and_running_steps_latest_first() -> None:
    steps = [
        _step(1, StepState.COMPLETED, "stock.release"),
        _step(2, StepState.COMPLETED, None),
        _step(3, StepState.RUNNING, "payments.refund"),
        _step(4, StepState.FAILED, "mail.unsend"),
        _step(5, StepState.NOT_STARTED, "ship.cancel"),
    ]
    assert plan(steps) == [
        UndoStep(
            seq=6,
            compensates=3,
            agent="payments.refund",
            payload={
                "request": {"n": 3},
                "result": None,
                "seq": 3,
                "idempotency_key": "t1/3",
                "outcome": "unknown",
            },
        ),
        UndoStep(
            seq=7,
            compensates=1,
            agent="stock.release",
            payload={
                "request": {"n": 1},
                "result": {"r": 1},
                "seq": 1,
                "idempotency_key": "t1/1",
                "outcome": "completed",
            },
        ),
    ]


def test_the_plan_is_the_same_after_some_undos_ran() -> None:
    forward = [_step(1, StepState.COMPLETED, "a.undo"), _step(2, StepState.COMPLETED, "b.undo")]
    first = plan(forward)
    done = [
        Step(task_id="t1", seq=3, agent="b.undo", state=StepState.COMPLETED, kind=StepKind.UNDO),
    ]
    compensated = [forward[0], replace(forward[1], state=StepState.COMPENSATED)]
    again = plan([*compensated, *done])
    assert [(u.seq, u.compensates, u.agent) for u in again] == [
        (u.seq, u.compensates, u.agent) for u in first
    ]
    assert again[0].payload["outcome"] == "completed"


def test_undo_seqs_follow_the_largest_forward_seq_even_if_not_undone() -> None:
    steps = [_step(1, StepState.COMPLETED), _step(9, StepState.FAILED)]
    assert [u.seq for u in plan(steps)] == [10]


def test_order_does_not_depend_on_input_order() -> None:
    steps = [_step(2, StepState.COMPLETED), _step(1, StepState.COMPLETED)]
    assert plan(steps) == plan(list(reversed(steps)))


def test_duplicate_forward_seqs_are_refused() -> None:
    with pytest.raises(ValueError, match="steps"):
        plan([_step(1, StepState.COMPLETED), _step(1, StepState.RUNNING)])
