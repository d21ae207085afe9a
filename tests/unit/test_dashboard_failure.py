"""What the task page tells the operator who fixes a task: the failure, the form's payloads, the undo."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from shepherd.core.records import Event, JsonValue, Step, Task
from shepherd.core.states import ProcessState, StepKind, StepState
from shepherd.dashboard.failure import (
    PREFILL_LIMIT,
    START_LINES,
    Undo,
    failure_of,
    prefills,
    undo_plan,
)

AT = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def _step(seq: int, agent: str, state: StepState, **fields: object) -> Step:
    return Step(task_id="t1", seq=seq, agent=agent, state=state, **fields)  # type: ignore[arg-type]


def _task(state: ProcessState, steps: tuple[Step, ...], error: JsonValue = None) -> Task:
    return Task(
        id="t1",
        workflow="orders.pay",
        key=None,
        input={},
        process_state=state,
        locked_by=None,
        lock_epoch=3,
        complete_by=None,
        failure_count=1,
        not_before=AT,
        reply_to=None,
        created_at=AT,
        updated_at=AT,
        error=error,
        steps=steps,
    )


def _event(kind: str, detail: JsonValue) -> Event:
    return Event(id=1, task_id="t1", key=None, reply_to=None, kind=kind, detail=detail, at=AT)


def test_a_task_not_in_error_has_no_failure() -> None:
    assert failure_of(_task(ProcessState.PENDING, ()), []) is None


def test_the_failure_of_a_gave_up_step_names_it_and_the_agents_tries_from_the_history() -> None:
    failed = _step(2, "charge", StepState.FAILED, attempt=3, error={"message": "503 from bank"})
    task = _task(
        ProcessState.ERROR,
        (_step(1, "reserve", StepState.COMPLETED), failed),
        error={"reason": "step 2 (charge) gave up", "seq": 2},
    )
    history = [_event("step_gave_up", {"seq": 2, "tries": 5}), _event("error", {})]

    failure = failure_of(task, history)

    assert failure is not None
    assert (failure.reason, failure.step, failure.tries, failure.traceback) == (
        "step 2 (charge) gave up",
        failed,
        5,
        None,
    )


def test_a_task_whose_claim_expired_failed_at_the_step_it_was_running() -> None:
    running = _step(2, "ship", StepState.RUNNING, request={"item": "book"})
    task = _task(
        ProcessState.ERROR,
        (_step(1, "reserve", StepState.COMPLETED), running),
        error={"reason": "complete_by expired 1 time; last: step 2 (ship) gave up after 2 tries"},
    )

    failure = failure_of(task, [_event("step_gave_up", {"seq": 2, "tries": 2})])

    assert failure is not None
    assert (failure.step, failure.tries) == (running, 2)
    assert prefills(task) == {2: json.dumps({"item": "book"}, indent=2)}


def test_a_long_traceback_is_shown_from_its_start_and_whole_behind_the_expander() -> None:
    lines = [f"  line {n}" for n in range(START_LINES + 8)]
    whole = "\n".join(lines) + "\n"
    task = _task(
        ProcessState.ERROR,
        (_step(1, "charge", StepState.FAILED, error={"type": "KeyError", "traceback": whole}),),
        error={"type": "KeyError", "message": "'card'", "bug": True},
    )

    failure = failure_of(task, [])

    assert failure is not None
    assert failure.reason == "KeyError: 'card'"
    assert failure.traceback == whole.rstrip("\n")
    assert failure.start == "\n".join(lines[:START_LINES])
    assert failure.lines == START_LINES + 8
    short = _task(ProcessState.ERROR, (), error={"reason": "x", "traceback": "a\nb\n"})
    shown = failure_of(short, [])
    assert shown is not None
    assert (shown.traceback, shown.start, shown.step) == ("a\nb", None, None)


def test_the_form_offers_each_step_not_completed_with_its_payload_pretty_printed() -> None:
    task = _task(
        ProcessState.ERROR,
        (
            _step(1, "reserve", StepState.COMPLETED, request={"sku": "pen"}),
            _step(2, "charge", StepState.FAILED, request={"sku": "pen", "note": "é"}),
            _step(3, "huge", StepState.FAILED, request="x" * PREFILL_LIMIT),
            _step(4, "release", StepState.NOT_STARTED, kind=StepKind.UNDO, compensates=1),
        ),
    )

    assert prefills(task) == {
        2: json.dumps({"sku": "pen", "note": "é"}, indent=2, ensure_ascii=False),
        3: "",  # too long to edit in a box: empty keeps the step's own
        4: "null",  # an undo step may be resubmitted too
    }


def test_a_compensation_that_could_not_finish_failed_at_its_undo_step() -> None:
    undo = _step(3, "refund", StepState.FAILED, kind=StepKind.UNDO, compensates=1)
    task = _task(
        ProcessState.ERROR,
        (
            _step(1, "charge", StepState.COMPENSATED, undo="refund"),
            _step(2, "ship", StepState.FAILED),
            undo,
        ),
        error={"reason": "compensation could not finish", "seq": 3},
    )

    failure = failure_of(task, [])

    assert failure is not None
    assert failure.step == undo


def test_cancel_undoes_the_completed_steps_with_an_undo_agent_newest_first() -> None:
    task = _task(
        ProcessState.ERROR,
        (
            _step(1, "reserve", StepState.COMPLETED, undo="release"),
            _step(2, "notify", StepState.COMPLETED),
            _step(3, "charge", StepState.COMPLETED, undo="refund"),
            _step(4, "ship", StepState.RUNNING, undo="recall"),
            _step(5, "pack", StepState.FAILED, undo="unpack"),
        ),
    )

    undo, kept = undo_plan(task)

    assert undo == [
        Undo(seq=4, agent="ship", undo="recall", unknown=True),
        Undo(seq=3, agent="charge", undo="refund", unknown=False),
        Undo(seq=1, agent="reserve", undo="release", unknown=False),
    ]
    assert [s.seq for s in kept] == [2]


def test_what_was_undone_already_is_not_undone_again() -> None:
    task = _task(
        ProcessState.ERROR,
        (
            _step(1, "reserve", StepState.COMPLETED, undo="release"),
            _step(2, "charge", StepState.COMPENSATED, undo="refund"),
            _step(3, "refund", StepState.COMPLETED, kind=StepKind.UNDO, compensates=2),
            _step(4, "release", StepState.FAILED, kind=StepKind.UNDO, compensates=1),
        ),
    )

    undo, kept = undo_plan(task)

    assert undo == [Undo(seq=1, agent="reserve", undo="release", unknown=False)]
    assert kept == []
    assert undo_plan(_task(ProcessState.PENDING, ())) == ([], [])
