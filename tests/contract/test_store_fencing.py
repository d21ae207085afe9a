"""Fencing: an owner that lost its claim can change nothing.

Every owner write carries the `lock_epoch` it claimed with. Once the epoch has
moved on (another claim, a release, a supervisor reset) the write raises
StaleEpochError and leaves the task, its steps, its requests and its history
exactly as they were.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from shepherd.core.states import ProcessState, StepState
from shepherd.errors import StaleEpochError
from support.factories import (
    claimed_task,
    snapshot,
    step_start,
    supervisor_reset,
    taken_request,
)

if TYPE_CHECKING:
    from shepherd.core.records import Task
    from shepherd.store.contract import Store
    from shepherd.testing import FakeClock

#: A zombie's write: (store, task as the zombie knew it) -> the write.
Write = Callable[["Store", "Task"], Awaitable[object]]

WRITES: dict[str, Write] = {
    "start_step": lambda store, task: store.start_step(step_start(task, seq=1, agent="a")),
    "finish_task": lambda store, task: store.finish_task(
        task.id, locked_by=str(task.locked_by), epoch=task.lock_epoch, result={"done": True}
    ),
    "fail_task": lambda store, task: store.fail_task(
        task.id,
        locked_by=str(task.locked_by),
        epoch=task.lock_epoch,
        state=ProcessState.ERROR,
        error={"reason": "zombie"},
    ),
    "start_compensation": lambda store, task: store.start_compensation(
        task.id, locked_by=str(task.locked_by), epoch=task.lock_epoch, error={"reason": "zombie"}
    ),
}


async def _assert_refused(store: Store, write: Write, zombie: Task) -> None:
    before = await snapshot(store, zombie.id)
    with pytest.raises(StaleEpochError) as caught:
        await write(store, zombie)
    assert caught.value.task_id == zombie.id
    assert caught.value.epoch == zombie.lock_epoch
    assert await snapshot(store, zombie.id) == before
    # A refused start_step must not have enqueued its request either.
    assert await store.take_requests(agents=["a"], worker="w", limit=10) == []


@pytest.mark.parametrize("write", sorted(WRITES))
async def test_a_write_with_a_stale_epoch_is_refused_and_changes_nothing(
    store: Store, write: str
) -> None:
    zombie = await claimed_task(store, locked_by="s1")
    await store.release_tasks([zombie.id], locked_by="s1")
    (current,) = await store.claim_tasks(locked_by="s2", limit=10)
    assert current.lock_epoch > zombie.lock_epoch

    await _assert_refused(store, WRITES[write], zombie)


@pytest.mark.parametrize("write", sorted(WRITES))
async def test_the_same_owner_with_an_older_epoch_is_refused(store: Store, write: str) -> None:
    zombie = await claimed_task(store, locked_by="s1")
    await store.release_tasks([zombie.id], locked_by="s1")
    (current,) = await store.claim_tasks(locked_by="s1", limit=10)
    assert current.locked_by == zombie.locked_by

    await _assert_refused(store, WRITES[write], zombie)


@pytest.mark.parametrize("write", sorted(WRITES))
async def test_a_write_by_another_owner_at_the_current_epoch_is_refused(
    store: Store, write: str
) -> None:
    current = await claimed_task(store, locked_by="s1")
    impostor = replace(current, locked_by="s2")

    await _assert_refused(store, WRITES[write], impostor)


@pytest.mark.parametrize("write", sorted(WRITES))
async def test_after_a_supervisor_reset_the_old_owners_late_write_fails(
    store: Store, fake_clock: FakeClock, write: str
) -> None:
    zombie = await claimed_task(store, locked_by="s1")
    await store.start_step(step_start(zombie, seq=1, agent="a"))

    reset = await supervisor_reset(store, fake_clock, zombie)

    assert reset.process_state is ProcessState.PENDING
    assert (reset.locked_by, reset.lock_epoch) == (None, zombie.lock_epoch + 1)
    assert reset.failure_count == 1
    assert "reset" in [e.kind for e in await store.task_events(zombie.id)]
    # The reset withdrew the zombie's request: no agent works for it any more.
    assert await store.take_requests(agents=["a"], worker="w", limit=10) == []
    await _assert_refused(store, WRITES[write], zombie)


async def test_a_new_owner_after_a_reset_can_write(store: Store, fake_clock: FakeClock) -> None:
    zombie = await claimed_task(store, locked_by="s1")
    await supervisor_reset(store, fake_clock, zombie)
    (current,) = await store.claim_tasks(locked_by="s2", limit=10)

    with pytest.raises(StaleEpochError):
        await WRITES["finish_task"](store, zombie)
    await store.finish_task(current.id, locked_by="s2", epoch=current.lock_epoch, result={"ok": 1})

    done = await store.get_task(current.id)
    assert done is not None
    assert (done.process_state, done.locked_by, done.result) == (
        ProcessState.PROCESSED,
        None,
        {"ok": 1},
    )
    with pytest.raises(StaleEpochError):
        await WRITES["fail_task"](store, current)


async def test_a_late_reply_from_an_old_epoch_is_discarded(
    store: Store, fake_clock: FakeClock
) -> None:
    zombie = await claimed_task(store, locked_by="s1")
    await store.start_step(step_start(zombie, seq=1, agent="a", within=10.0))
    request = await taken_request(store, agent="a")
    # The agent answers in time, but its owner stalls and the supervisor resets the task.
    assert await store.reply_and_ack(request, worker="w1", ok=True, body={"old": True})
    await supervisor_reset(store, fake_clock, zombie)
    (current,) = await store.claim_tasks(locked_by="s2", limit=10)

    assert await store.record_replies(locked_by="s1", limit=10) == []
    taken = await store.record_replies(locked_by="s2", limit=10)

    assert [(r.task_id, r.seq, r.lock_epoch, ok) for r, ok in taken] == [
        (zombie.id, 1, zombie.lock_epoch, False)
    ]
    after = await store.get_task(zombie.id)
    assert after is not None
    (step,) = after.steps
    assert (step.state, step.attempt, step.result) == (StepState.RUNNING, 1, None)
    assert "step_completed" not in [e.kind for e in await store.task_events(zombie.id)]
    # Discarded replies are consumed: they do not come back.
    assert await store.record_replies(locked_by="s2", limit=10) == []

    # The new owner runs the step again; its own reply is recorded.
    await store.start_step(step_start(current, seq=1, agent="a", attempt=2))
    fresh = await taken_request(store, agent="a", worker="w2")
    assert (fresh.attempt, fresh.lock_epoch) == (2, current.lock_epoch)
    assert await store.reply_and_ack(fresh, worker="w2", ok=True, body={"new": True})
    assert [ok for _, ok in await store.record_replies(locked_by="s2", limit=10)] == [True]
    final = await store.get_task(zombie.id)
    assert final is not None
    assert [(s.state, s.attempt, s.result) for s in final.steps] == [
        (StepState.COMPLETED, 2, {"new": True})
    ]


async def test_a_late_reply_from_an_old_attempt_is_discarded(store: Store) -> None:
    task = await claimed_task(store, locked_by="s1")
    await store.start_step(step_start(task, seq=1, agent="a", attempt=1))
    old = await taken_request(store, agent="a", worker="w1")
    assert await store.reply_and_ack(old, worker="w1", ok=True, body={"attempt": 1})
    # The owner had given up on attempt 1 and started attempt 2 before recording.
    await store.start_step(step_start(task, seq=1, agent="a", attempt=2))

    taken = await store.record_replies(locked_by="s1", limit=10)

    assert [(r.attempt, ok) for r, ok in taken] == [(1, False)]
    after = await store.get_task(task.id)
    assert after is not None
    assert [(s.state, s.attempt) for s in after.steps] == [(StepState.RUNNING, 2)]
