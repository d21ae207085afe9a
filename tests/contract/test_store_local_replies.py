"""Replies recorded where they are made: `reply_and_ack(..., recorder=owner)`.

When the scheduler in the agent worker's own process holds the task, the reply
is recorded on its step in the reply's transaction (one transaction less per
step) with exactly the checks `record_replies` applies; it is never queued.
A task held by another scheduler gets its reply queued as before, and a reply
for an attempt the holder gave up on is dropped, as `record_replies` drops it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from shepherd.core.records import Reply
from shepherd.core.states import StepKind, StepState
from shepherd.errors import StaleEpochError
from support.factories import claimed_task, step_start, taken_request

if TYPE_CHECKING:
    from shepherd.store.contract import Store


async def test_a_reply_to_the_local_holder_is_recorded_in_its_own_transaction(
    store: Store,
) -> None:
    task = await claimed_task(store, locked_by="s1", key="order-1")
    await store.start_step(step_start(task, seq=1, agent="a", within=10.0))
    before = await store.get_task(task.id)
    request = await taken_request(store, agent="a")

    answered = await store.reply_and_ack(
        request, worker="w1", ok=True, body={"paid": True}, recorder="s1"
    )

    assert isinstance(answered, Reply)
    assert (answered.task_id, answered.seq, answered.attempt, answered.ok, answered.body) == (
        task.id,
        1,
        1,
        True,
        {"paid": True},
    )
    after = await store.get_task(task.id)
    assert after is not None
    assert before is not None
    (step,) = after.steps
    assert (step.state, step.result, step.attempt) == (StepState.COMPLETED, {"paid": True}, 1)
    # The claim moved one window ahead, as recording a queued reply moves it.
    assert after.complete_by is not None
    assert before.complete_by is not None
    assert after.complete_by >= before.complete_by
    kinds = [e.kind for e in await store.task_events(task.id)]
    assert kinds.count("step_completed") == 1
    # Nothing was queued: the holder's reply loop finds nothing to record.
    assert await store.record_replies(locked_by="s1", limit=10) == []
    assert await store.take_requests(agents=["a"], worker="w1", limit=10) == []


async def test_a_failure_to_the_local_holder_is_recorded_as_the_steps_error(
    store: Store,
) -> None:
    task = await claimed_task(store, locked_by="s1")
    await store.start_step(step_start(task, seq=1, agent="a"))
    request = await taken_request(store, agent="a")
    error = {"type": "Declined", "message": "card declined"}

    answered = await store.reply_and_ack(request, worker="w1", ok=False, body=error, recorder="s1")

    assert isinstance(answered, Reply)
    assert (answered.ok, answered.body) == (False, error)
    after = await store.get_task(task.id)
    assert after is not None
    (step,) = after.steps
    assert (step.state, step.error) == (StepState.FAILED, error)
    assert "step_failed" in [e.kind for e in await store.task_events(task.id)]


async def test_an_undo_reply_to_the_local_holder_marks_its_step_compensated(
    store: Store,
) -> None:
    task = await claimed_task(store, locked_by="s1")
    await store.start_step(step_start(task, seq=1, agent="a"))
    forward = await taken_request(store, agent="a")
    assert await store.reply_and_ack(forward, worker="w1", ok=True, body=1, recorder="s1")
    await store.start_step(
        replace(step_start(task, seq=2, agent="undo_a", kind=StepKind.UNDO), compensates=1)
    )
    undo = await taken_request(store, agent="undo_a")

    assert isinstance(
        await store.reply_and_ack(undo, worker="w1", ok=True, body=None, recorder="s1"), Reply
    )

    after = await store.get_task(task.id)
    assert after is not None
    assert [(s.seq, s.state) for s in after.steps] == [
        (1, StepState.COMPENSATED),
        (2, StepState.COMPLETED),
    ]


async def test_a_reply_to_a_task_held_elsewhere_is_queued_for_its_holder(store: Store) -> None:
    task = await claimed_task(store, locked_by="s2")
    await store.start_step(step_start(task, seq=1, agent="a"))
    request = await taken_request(store, agent="a")

    answered = await store.reply_and_ack(request, worker="w1", ok=True, body="x", recorder="s1")

    assert answered is True
    pending = await store.get_task(task.id)
    assert pending is not None
    assert [s.state for s in pending.steps] == [StepState.RUNNING]
    taken = await store.record_replies(locked_by="s2", limit=10)
    assert [(r.task_id, r.body, ok) for r, ok in taken] == [(task.id, "x", True)]


async def test_a_reply_for_an_attempt_the_local_holder_gave_up_on_is_dropped(
    store: Store,
) -> None:
    task = await claimed_task(store, locked_by="s1")
    await store.start_step(step_start(task, seq=1, agent="a", attempt=1))
    old = await taken_request(store, agent="a", worker="w1")
    # The holder gave up on attempt 1 and started attempt 2 (its request is new).
    await store.start_step(step_start(task, seq=1, agent="a", attempt=2))
    fresh = await taken_request(store, agent="a", worker="w2")

    # The old request was superseded: its reply is refused like any other.
    assert not await store.reply_and_ack(old, worker="w1", ok=True, body=1, recorder="s1")
    answered = await store.reply_and_ack(fresh, worker="w2", ok=True, body=2, recorder="s1")

    assert isinstance(answered, Reply)
    assert answered.attempt == 2
    after = await store.get_task(task.id)
    assert after is not None
    assert [(s.state, s.attempt, s.result) for s in after.steps] == [(StepState.COMPLETED, 2, 2)]


async def test_a_reply_for_an_older_claim_of_the_same_holder_is_not_recorded(
    store: Store,
) -> None:
    first = await claimed_task(store, locked_by="s1")
    await store.start_step(step_start(first, seq=1, agent="a", within=10.0))
    request = await taken_request(store, agent="a")
    # The holder lets the task go and claims it again: a newer epoch, same name.
    await store.release_tasks([first.id], locked_by="s1")
    (again,) = await store.claim_tasks(locked_by="s1", limit=10)
    assert again.lock_epoch > first.lock_epoch

    answered = await store.reply_and_ack(request, worker="w1", ok=True, body=1, recorder="s1")

    assert not isinstance(answered, Reply)
    after = await store.get_task(first.id)
    assert after is not None
    assert [s.state for s in after.steps] == [StepState.RUNNING]
    assert "step_completed" not in [e.kind for e in await store.task_events(first.id)]
    assert await store.record_replies(locked_by="s1", limit=10) == []


async def test_a_step_taken_as_it_is_queued_is_leased_to_that_worker_alone(
    store: Store,
) -> None:
    task = await claimed_task(store, locked_by="s1")

    request = await store.start_step_taken(
        step_start(task, seq=1, agent="a", payload={"amount": 5}, within=4.0), worker="w1"
    )

    assert (request.task_id, request.seq, request.attempt, request.lock_epoch) == (
        task.id,
        1,
        1,
        task.lock_epoch,
    )
    assert (request.agent, request.payload, request.within) == ("a", {"amount": 5}, 4.0)
    after = await store.get_task(task.id)
    assert after is not None
    (step,) = after.steps
    assert (step.state, step.complete_by) == (StepState.RUNNING, request.complete_by)
    # No other worker sees it: it is leased until its complete_by, as a take leases it.
    assert await store.take_requests(agents=["a"], worker="w2", limit=10) == []
    assert not await store.reply_and_ack(request, worker="w2", ok=True, body=1)
    answered = await store.reply_and_ack(request, worker="w1", ok=True, body=7, recorder="s1")
    assert isinstance(answered, Reply)
    assert answered.body == 7


async def test_a_step_taken_as_it_is_queued_is_fenced_like_any_start(store: Store) -> None:
    zombie = await claimed_task(store, locked_by="s1")
    await store.release_tasks([zombie.id], locked_by="s1")
    await store.claim_tasks(locked_by="s2", limit=10)

    with pytest.raises(StaleEpochError):
        await store.start_step_taken(step_start(zombie, seq=1, agent="a"), worker="w1")

    after = await store.get_task(zombie.id)
    assert after is not None
    assert after.steps == ()
    assert await store.take_requests(agents=["a"], worker="w1", limit=10) == []
