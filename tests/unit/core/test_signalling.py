"""`core.signalling`: what a wait does at its seq, its timeout, and the waits a task has running."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from shepherd.core.compensation import plan
from shepherd.core.records import JsonValue, Step
from shepherd.core.replay import NonDeterminism
from shepherd.core.replay import decide as decide_call
from shepherd.core.signalling import (
    Ask,
    Received,
    TimedOut,
    decide,
    step_name,
    timeout_at_after,
    wait_until,
    waits_running,
)
from shepherd.core.states import StepKind, StepState
from shepherd.core.timing import LATEST_DUE
from support.records import task_record

NOW = datetime(2030, 1, 1, 12, tzinfo=UTC)
HOUR = timedelta(hours=1)


def _wait(state: StepState, *, name: str = "go", seq: int = 2, result: JsonValue = None) -> Step:
    return Step(
        task_id="t1",
        seq=seq,
        agent=step_name(name),
        kind=StepKind.SIGNAL,
        state=state,
        attempt=1,
        complete_by=NOW + HOUR,
        result=result,
    )


def test_a_first_wait_asks_the_store_with_its_own_timeout() -> None:
    assert decide(None, 2, "go", timeout_at=NOW + HOUR) == Ask(timeout_at=NOW + HOUR)
    assert decide(None, 2, "go", timeout_at=None) == Ask(timeout_at=None)


def test_a_replayed_wait_returns_its_payload_raises_its_timeout_or_asks_with_the_recorded_one() -> (
    None
):
    done = _wait(StepState.COMPLETED, result={"ok": 1})
    assert decide(done, 2, "go", timeout_at=None) == Received(payload={"ok": 1})
    failed = _wait(StepState.FAILED)
    assert decide(failed, 2, "go", timeout_at=None) == TimedOut(timeout_at=NOW + HOUR)
    running = _wait(StepState.RUNNING)
    later = NOW + 5 * HOUR  # a replay computes a later timeout: the recorded one wins
    assert decide(running, 2, "go", timeout_at=later) == Ask(timeout_at=NOW + HOUR)


def test_a_wait_where_another_name_or_a_call_was_recorded_is_non_determinism() -> None:
    other = _wait(StepState.RUNNING, name="stop")
    assert decide(other, 2, "go", timeout_at=None) == NonDeterminism(
        seq=2, recorded="ctx.wait_for:stop", called="ctx.wait_for:go"
    )
    call = Step(task_id="t1", seq=2, agent="pay", state=StepState.COMPLETED, attempt=1)
    assert isinstance(decide(call, 2, "go", timeout_at=None), NonDeterminism)
    # A call where a wait was recorded: the names differ, so replay says so too.
    assert isinstance(decide_call(_wait(StepState.COMPLETED), "go", 2), NonDeterminism)


def test_a_timeout_is_checked_and_capped() -> None:
    assert timeout_at_after(None, now=NOW) is None
    assert timeout_at_after(0, now=NOW) == NOW
    assert timeout_at_after(3600, now=NOW) == NOW + HOUR
    assert timeout_at_after(10**9 * 1.0, now=datetime(8999, 1, 1, tzinfo=UTC)) == LATEST_DUE
    for bad, says in [
        (-1, "ctx.wait_for's timeout must be >= 0"),
        (math.nan, "not nan"),
        (math.inf, "not inf"),
        ("60", "not str"),
        (True, "not bool"),
    ]:
        with pytest.raises(ValueError, match=says):
            timeout_at_after(bad, now=NOW)
    assert wait_until(None) == LATEST_DUE
    assert wait_until(NOW) == NOW


def test_a_tasks_running_waits_are_named_and_never_undone() -> None:
    task = task_record(
        steps=(
            Step(task_id="t1", seq=1, agent="book", state=StepState.COMPLETED, attempt=1, undo="u"),
            _wait(StepState.COMPLETED, name="first"),
            _wait(StepState.RUNNING, name="second", seq=3),
        )
    )
    assert waits_running(task) == ["second"]
    assert [u.compensates for u in plan(list(task.steps))] == [1]
