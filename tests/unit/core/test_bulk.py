"""A bulk action's record: what each event's detail holds, the outcome as JSON and back, a capped count."""

from __future__ import annotations

import pytest

from shepherd.core.bulk import BulkAction, BulkMark, BulkOutcome, Refusal, TaskCount
from shepherd.core.operator import on_retry


def test_a_bulk_retry_records_who_and_which_bulk_action() -> None:
    effect = on_retry(
        seq=None, cancel_requested=False, undoing=False, by="anna", bulk=BulkMark(bulk="b1", of=50)
    )
    assert effect.detail == {"seq": None, "state": "pending", "by": "anna", "bulk": "b1", "of": 50}
    alone = on_retry(seq=2, cancel_requested=False, undoing=False, by="anna")
    assert alone.detail == {"seq": 2, "state": "pending", "by": "anna"}


@pytest.mark.parametrize("action", list(BulkAction))
def test_an_outcome_goes_to_json_and_back(action: BulkAction) -> None:
    outcome = BulkOutcome(
        action=action,
        bulk="b1",
        done=("t1", "t3"),
        refused=(Refusal(task_id="t2", reason="it is pending, not error"),),
        alerts=2 if action is BulkAction.ACKNOWLEDGE else 0,
    )
    document = outcome.to_json()
    assert (document["of"], document["done"]) == (3, 2)
    assert ("alerts" in document) is (action is BulkAction.ACKNOWLEDGE)
    assert BulkOutcome.from_json(document) == outcome


@pytest.mark.parametrize(
    "value",
    [
        None,
        [],
        {"action": "retry"},
        {"action": "explode", "bulk": "b", "done_ids": [], "refused": []},
        {"action": "retry", "bulk": "b", "done_ids": [], "refused": [3]},
    ],
)
def test_anything_else_is_not_an_outcome(value: object) -> None:
    with pytest.raises(ValueError, match=r"bulk outcome|explode|refusal"):
        BulkOutcome.from_json(value)


def test_a_count_past_its_cap_says_so() -> None:
    assert TaskCount(count=1234, more=False).shown() == "1,234"
    assert TaskCount(count=10_000, more=True).shown() == "10,000+"
