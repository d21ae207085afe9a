"""What `shepherd show` and `shepherd tasks` say of an error: its reason on one line, its tracebacks."""

from __future__ import annotations

from datetime import UTC, datetime

from shepherd.cli.render import reason, tracebacks
from shepherd.core.records import JsonValue, Step, Task
from shepherd.core.states import ProcessState, StepState

NOW = datetime(2025, 1, 31, 12, 0, tzinfo=UTC)
TRACE = "Traceback (most recent call last):\n  ...\nKeyError: 'card'\n"


def task(error: JsonValue, *steps: Step) -> Task:
    return Task(
        id="01a208d352cf79e7f72c",
        workflow="orders.process",
        key=None,
        input={},
        process_state=ProcessState.ERROR,
        locked_by=None,
        lock_epoch=1,
        complete_by=None,
        failure_count=0,
        not_before=NOW,
        reply_to=None,
        created_at=NOW,
        updated_at=NOW,
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
