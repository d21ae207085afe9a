"""Operator actions at store level: retry an `error` task, cancel one that has not ended."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from shepherd.core.states import ProcessState, StepState
from shepherd.errors import ConfigError, InvalidStateError, StaleEpochError, UnknownTaskError
from shepherd.store import open_store
from support.factories import (
    claimed_task,
    step_start,
    submitted_task,
    taken_request,
)

if TYPE_CHECKING:
    from shepherd.core.records import Task
    from shepherd.store.contract import Store
    from support.factories import Stores


async def _failed_step_task(store: Store) -> Task:
    """A task whose step 1 failed and which an owner then put in `error`."""
    task = await claimed_task(store, locked_by="s1")
    await store.start_step(step_start(task, seq=1, agent="a"))
    request = await taken_request(store, agent="a")
    assert await store.reply_and_ack(request, worker="w1", ok=False, body={"message": "no"})
    assert [ok for _, ok in await store.record_replies(locked_by="s1", limit=10)] == [True]
    await store.fail_task(
        task.id,
        locked_by="s1",
        epoch=task.lock_epoch,
        state=ProcessState.ERROR,
        error={"reason": "x"},
    )
    return task


async def test_retry_puts_an_error_task_back_to_pending_from_its_failed_step(store: Store) -> None:
    task = await _failed_step_task(store)

    retried = await store.retry_task(task.id)

    assert (retried.process_state, retried.locked_by, retried.failure_count, retried.error) == (
        ProcessState.PENDING,
        None,
        0,
        None,
    )
    assert retried.lock_epoch == task.lock_epoch + 1
    (claimed,) = await store.claim_tasks(locked_by="s2", limit=10)
    assert [(s.seq, s.state) for s in claimed.steps] == [(1, StepState.NOT_STARTED)]
    assert "retried" in [e.kind for e in await store.task_events(task.id)]


async def test_retry_with_a_new_payload_replaces_the_steps_request(store: Store) -> None:
    task = await _failed_step_task(store)

    await store.retry_task(task.id, seq=1, payload={"fixed": True})

    (claimed,) = await store.claim_tasks(locked_by="s2", limit=10)
    assert claimed.steps[0].request == {"fixed": True}


async def test_a_retry_with_a_new_payload_keeps_the_payload_it_replaced_in_its_event(
    store: Store,
) -> None:
    task = await _failed_step_task(store)  # step 1 was sent {"seq": 1}

    await store.retry_task(task.id, seq=1, payload={"fixed": True}, by="anna")
    await _fail_again(store, task.id)
    await store.retry_task(task.id, seq=1, payload={"fixed": "twice"})
    await _fail_again(store, task.id)
    await store.retry_task(task.id, seq=1)  # its payload as it is: nothing replaced
    await _fail_again(store, task.id)
    await store.retry_task(task.id)

    retried = [e.detail for e in await store.task_events(task.id) if e.kind == "retried"]
    assert retried == [
        {"seq": 1, "state": "pending", "by": "anna", "replaced": {"seq": 1}},
        {"seq": 1, "state": "pending", "replaced": {"fixed": True}},
        {"seq": 1, "state": "pending"},
        {"seq": None, "state": "pending"},
    ]


async def test_a_replaced_payload_over_the_stores_limit_is_recorded_by_its_size(
    stores: Stores,
) -> None:
    store = await stores.connect()
    task = await _failed_step_task(store)
    await store.retry_task(task.id, seq=1, payload={"big": "x" * 100})
    await _fail_again(store, task.id)
    small = open_store(stores.url, clock=stores.clock, max_payload_bytes=64)
    await small.open()
    try:
        await small.retry_task(task.id, seq=1, payload={"small": 1})
    finally:
        await small.close()

    last = (await store.task_events(task.id))[-1]
    assert last.detail == {
        "seq": 1,
        "state": "pending",
        "replaced": {"truncated": True, "bytes": len('{"big":""}') + 100},
    }


async def _fail_again(store: Store, task_id: str) -> None:
    """Claim the retried task, send its step 1 again, have it fail, and put the task in `error`."""
    (claimed,) = await store.claim_tasks(locked_by="s1", limit=10)
    assert claimed.id == task_id
    (step,) = claimed.steps
    await store.start_step(
        step_start(claimed, seq=1, agent="a", attempt=step.attempt + 1, payload=step.request)
    )
    request = await taken_request(store, agent="a")
    assert await store.reply_and_ack(request, worker="w1", ok=False, body={"message": "no"})
    assert [ok for _, ok in await store.record_replies(locked_by="s1", limit=10)] == [True]
    await store.fail_task(
        task_id,
        locked_by="s1",
        epoch=claimed.lock_epoch,
        state=ProcessState.ERROR,
        error={"reason": "again"},
    )


@pytest.mark.parametrize(
    "seq",
    [2**31, -(2**31) - 1, 10**30, 10**5000, True, "1", 1.0],
    ids=["2^31", "-2^31-1", "10^30", "10^5000", "True", "'1'", "1.0"],
)
async def test_retry_from_a_step_number_no_store_holds_is_refused_and_changes_nothing(
    store: Store, seq: object
) -> None:
    task = await _failed_step_task(store)

    with pytest.raises(ConfigError) as caught:
        await store.retry_task(task.id, seq=seq, payload={"fixed": True})  # type: ignore[arg-type]

    assert caught.value.field == "seq"
    assert (await store.get_task(task.id)).process_state is ProcessState.ERROR  # type: ignore[union-attr]


async def test_retry_of_a_task_not_in_error_is_refused(store: Store) -> None:
    task = await claimed_task(store, locked_by="s1")

    with pytest.raises(InvalidStateError):
        await store.retry_task(task.id)
    with pytest.raises(UnknownTaskError):
        await store.retry_task("no-such-task")

    after = await store.get_task(task.id)
    assert after is not None
    assert (after.process_state, after.locked_by) == (ProcessState.PROCESSING, "s1")


async def test_cancel_fences_the_owner_and_makes_the_task_claimable_for_compensation(
    store: Store,
) -> None:
    task = await claimed_task(store, locked_by="s1")
    await store.start_step(step_start(task, seq=1, agent="a"))

    cancelled = await store.cancel_task(task.id)

    assert (cancelled.process_state, cancelled.locked_by, cancelled.cancel_requested) == (
        ProcessState.COMPENSATING,
        None,
        True,
    )
    with pytest.raises(StaleEpochError):
        await store.finish_task(task.id, locked_by="s1", epoch=task.lock_epoch, result=None)
    assert await store.take_requests(agents=["a"], worker="w", limit=10) == []
    (claimed,) = await store.claim_tasks(locked_by="s2", limit=10)
    assert claimed.process_state is ProcessState.COMPENSATING
    assert claimed.cancel_requested


async def test_cancel_of_an_ended_task_is_refused(store: Store) -> None:
    task = await claimed_task(store, locked_by="s1")
    await store.finish_task(task.id, locked_by="s1", epoch=task.lock_epoch, result=1)

    with pytest.raises(InvalidStateError):
        await store.cancel_task(task.id)
    with pytest.raises(UnknownTaskError):
        await store.cancel_task("no-such-task")


async def test_a_pending_task_can_be_cancelled(store: Store) -> None:
    task = await submitted_task(store)

    cancelled = await store.cancel_task(task.id)

    assert cancelled.process_state is ProcessState.COMPENSATING
    assert cancelled.cancel_requested


async def test_a_note_joins_the_tasks_history_with_its_key_and_reply_to(store: Store) -> None:
    task = await submitted_task(store, key="order-1", reply_to="shop")

    await store.note(task.id, "step_gave_up", {"seq": 1, "error": {"message": "503"}})
    await store.note("no-such-task", "step_gave_up", {"seq": 1})

    last = (await store.task_events(task.id))[-1]
    assert (last.kind, last.key, last.reply_to) == ("step_gave_up", "order-1", "shop")
    assert last.detail == {"seq": 1, "error": {"message": "503"}}
    assert [e.kind for e in await store.read_events(reply_to=None, after_id=last.id)] == []
