"""`sleep_task` and `wake_task`: a workflow's sleep gives up its claim; an operator wakes it.

`sleep_task` records the sleep step (kind `sleep`, its `complete_by` the
wake-up, kept if already recorded) and leaves the task pending, unowned, due
at the wake-up, fenced by the claim's holder and epoch; it may ride with the
replies of a `reply_then`. `wake_task` moves a sleeping task's wake-up to now
and refuses any other task, changing nothing.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

import pytest

from shepherd.core.records import Reply
from shepherd.core.states import ProcessState, StepKind, StepState
from shepherd.errors import InvalidStateError, StaleEpochError, UnknownTaskError
from shepherd.store.ops import ReplyAndAck, SleepTask
from support.factories import claimed_task, step_start, submitted_task, taken_request

if TYPE_CHECKING:
    from shepherd.store.contract import Store
    from shepherd.testing import FakeClock

HOUR = timedelta(hours=1)


async def test_a_sleep_records_its_step_and_gives_up_the_claim_until_its_wake_up(
    store: Store, fake_clock: FakeClock
) -> None:
    task = await claimed_task(store, locked_by="s1")
    wake_at = fake_clock.now() + HOUR

    await store.sleep_task(task.id, locked_by="s1", epoch=task.lock_epoch, seq=1, wake_at=wake_at)

    asleep = await store.get_task(task.id)
    assert asleep is not None
    assert (asleep.process_state, asleep.locked_by, asleep.complete_by) == (
        ProcessState.PENDING,
        None,
        None,
    )
    assert asleep.not_before == wake_at
    (step,) = asleep.steps
    assert (step.seq, step.kind, step.state, step.complete_by) == (
        1,
        StepKind.SLEEP,
        StepState.COMPLETED,
        wake_at,
    )
    assert "sleeping" in [e.kind for e in await store.task_events(task.id)]
    # Not claimed before its wake-up; claimed at it, with its sleep step.
    fake_clock.advance(HOUR - timedelta(seconds=1))
    assert await store.claim_tasks(locked_by="s2", limit=10) == []
    fake_clock.advance(1.0)
    (woken,) = await store.claim_tasks(locked_by="s2", limit=10)
    assert woken.id == task.id
    assert [s.kind for s in woken.steps] == [StepKind.SLEEP]


async def test_a_sleep_is_fenced_and_a_recorded_wake_up_is_kept(
    store: Store, fake_clock: FakeClock
) -> None:
    task = await claimed_task(store, locked_by="s1")
    first = fake_clock.now() + HOUR
    with pytest.raises(StaleEpochError):
        await store.sleep_task(task.id, locked_by="s2", epoch=task.lock_epoch, seq=1, wake_at=first)
    with pytest.raises(StaleEpochError):
        await store.sleep_task(
            task.id, locked_by="s1", epoch=task.lock_epoch + 1, seq=1, wake_at=first
        )
    unchanged = await store.get_task(task.id)
    assert unchanged is not None
    assert (unchanged.locked_by, unchanged.steps) == ("s1", ())

    await store.sleep_task(task.id, locked_by="s1", epoch=task.lock_epoch, seq=1, wake_at=first)
    # Claimed again early (an operator's wake, say), it sleeps again: the first instant is kept.
    await store.wake_task(task.id)
    (again,) = await store.claim_tasks(locked_by="s1", limit=10)
    later = first + HOUR
    await store.sleep_task(task.id, locked_by="s1", epoch=again.lock_epoch, seq=1, wake_at=later)
    stored = await store.get_task(task.id)
    assert stored is not None
    (step,) = stored.steps
    assert step.complete_by == fake_clock.now()  # as the wake left it, not `later`


async def test_a_sleep_rides_with_the_replies_of_reply_then(store: Store) -> None:
    task = await claimed_task(store, locked_by="s1")
    await store.start_step(step_start(task, seq=1, agent="a"))
    request = await taken_request(store, agent="a")
    wake_at = store.now() + HOUR

    went = await store.reply_then(
        [ReplyAndAck(request, worker="w1", ok=True, body={"n": 1}, recorder="s1")],
        then=SleepTask(task.id, locked_by="s1", epoch=task.lock_epoch, seq=2, wake_at=wake_at),
    )

    (answer,) = went.replies
    assert isinstance(answer, Reply)
    assert went.then is None
    stored = await store.get_task(task.id)
    assert stored is not None
    assert [(s.seq, s.kind, s.state) for s in stored.steps] == [
        (1, StepKind.FORWARD, StepState.COMPLETED),
        (2, StepKind.SLEEP, StepState.COMPLETED),
    ]
    assert (stored.process_state, stored.locked_by, stored.not_before) == (
        ProcessState.PENDING,
        None,
        wake_at,
    )


async def test_an_operator_wakes_a_sleeping_task_and_nothing_else(
    store: Store, fake_clock: FakeClock
) -> None:
    task = await claimed_task(store, locked_by="s1")
    wake_at = fake_clock.now() + HOUR
    with pytest.raises(InvalidStateError, match="processing"):
        await store.wake_task(task.id, by="ops")
    await store.sleep_task(task.id, locked_by="s1", epoch=task.lock_epoch, seq=1, wake_at=wake_at)
    fake_clock.advance(60.0)

    await store.wake_task(task.id, by="ops")

    woken = await store.get_task(task.id)
    assert woken is not None
    assert woken.not_before == fake_clock.now()
    assert woken.steps[0].complete_by == fake_clock.now()
    events = [e for e in await store.task_events(task.id) if e.kind == "woken"]
    assert [e.detail for e in events] == [{"seq": 1, "by": "ops"}]
    # Awake now: a second wake is refused, as are a pending task that never slept and
    # an unknown one; none changes anything.
    with pytest.raises(InvalidStateError, match="not sleeping"):
        await store.wake_task(task.id, by="ops")
    plain = await submitted_task(store)
    with pytest.raises(InvalidStateError, match="not sleeping"):
        await store.wake_task(plain.id)
    with pytest.raises(UnknownTaskError):
        await store.wake_task("no-such-task")
    assert [e.kind for e in await store.task_events(task.id)].count("woken") == 1
    (claimed,) = await store.claim_tasks(locked_by="s2", limit=1)
    assert claimed.id in (task.id, plain.id)
