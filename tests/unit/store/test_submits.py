"""Submitting many tasks: each operation checked whole, its outcomes gathered, all or none."""

from __future__ import annotations

import pytest

from shepherd.errors import PayloadError, StoreUnavailableError
from shepherd.store.contract import NewTask, Submitted
from shepherd.store.encoding import Encoding
from shepherd.store.ops import SubmitTasks
from shepherd.store.submits import Plan, encode_all


def _op(*inputs: object) -> SubmitTasks:
    return SubmitTasks(tasks=tuple(NewTask(workflow="wf", input=i) for i in inputs))


def test_encode_all_names_the_first_refused_input() -> None:
    assert encode_all(Encoding(), _op(1, "a").tasks) == ["1", '"a"']
    with pytest.raises(
        PayloadError, match=r"^submissions\[2\]: payload is 22 bytes, over the 10 bytes limit$"
    ):
        encode_all(Encoding(payload_limit=10), _op(1, 2, "x" * 20, {1}).tasks)


def test_an_operation_with_a_refused_input_is_refused_whole_and_the_others_go_on() -> None:
    plan = Plan.of(Encoding(), [_op(1, 2), _op(3, float("nan")), _op(4)])

    assert [t.input for t in plan.tasks] == [1, 2, 4]
    assert plan.encoded == ["1", "2", "4"]
    inserted = [Submitted(task_id=f"t{n}", created=True) for n in (1, 2, 4)]
    outcomes = plan.finish(inserted)
    assert outcomes[0] == inserted[:2]
    assert isinstance(outcomes[1], PayloadError)
    assert str(outcomes[1]).startswith("submissions[1]: payload is not JSON")
    assert outcomes[2] == inserted[2:]


def test_a_task_failing_after_the_check_breaks_the_batch_naming_its_index() -> None:
    plan = Plan.of(Encoding(), [_op(1), _op(2, 3)])
    vanished = StoreUnavailableError("its key's task is gone since")

    with pytest.raises(StoreUnavailableError, match=r"^submissions\[1\]: its key's task"):
        plan.finish(
            [Submitted(task_id="a", created=True), Submitted(task_id="b", created=True), vanished]
        )
