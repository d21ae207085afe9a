"""What `shepherd show` and `shepherd tasks` say of an error: its reason on one line, its tracebacks."""

from __future__ import annotations

from shepherd.cli.render import reason, tracebacks
from shepherd.core.records import JsonValue, Step, Task
from shepherd.core.states import ProcessState, StepState
from support.records import task_record

TRACE = "Traceback (most recent call last):\n  ...\nKeyError: 'card'\n"


def task(error: JsonValue, *steps: Step) -> Task:
    return task_record(
        id="01a208d352cf79e7f72c",
        workflow="orders.process",
        input={},
        process_state=ProcessState.ERROR,
        lock_epoch=1,
        error=error,
        steps=steps,
    )


def step(seq: int, agent: str, error: JsonValue) -> Step:
    return Step(
        task_id="01a208d352cf79e7f72c", seq=seq, agent=agent, state=StepState.FAILED, error=error
    )


def test_a_bug_reads_with_its_type() -> None:
    bug = {"type": "KeyError", "message": "'card'", "bug": True, "traceback": TRACE, "tries": 5}

    assert reason(bug) == "KeyError: 'card'"
    assert reason({"type": "PermanentError", "message": "card declined"}) == "card declined"
    assert reason({"type": "RuntimeError", "message": ""}) == "RuntimeError"
    assert (
        reason({"reason": "step 2 (payments.charge)\nraised"}) == "step 2 (payments.charge) raised"
    )


def test_each_distinct_traceback_is_shown_once_with_where_it_came_from() -> None:
    bug = {"type": "KeyError", "message": "'card'", "bug": True, "traceback": TRACE, "tries": 5}
    failed = task(
        {
            "reason": "r",
            "type": "KeyError",
            "seq": 2,
            "agent": "payments.charge",
            "traceback": TRACE,
        },
        step(1, "stock.reserve", {"type": "PermanentError", "message": "none left"}),
        step(2, "payments.charge", bug),
    )

    assert tracebacks(failed) == [("traceback of step 2 (payments.charge)", TRACE)]
    assert tracebacks(task({"reason": "r", "traceback": "other"})) == [
        ("traceback of the task's error", "other")
    ]
    assert tracebacks(task({"reason": "no traceback"})) == []
