"""Delayed tasks and deadlines in the store: `not_before` on the store's clock, `cancel_overdue`."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING

from shepherd.core.states import ProcessState
from shepherd.core.timing import DEADLINE_PASSED
from support.factories import leadership, new_task, step_start, tasks_in_error

if TYPE_CHECKING:
    from shepherd.store.contract import Store
    from shepherd.testing import FakeClock


async def claimable(store: Store) -> list[str]:
    return [t.id for t in await store.claim_tasks(locked_by="s1", limit=10)]


async def test_a_delayed_task_is_stored_at_once_and_claimed_at_its_time(
    store: Store, fake_clock: FakeClock
) -> None:
    submitted = await store.submit_task(replace(new_task(), delay=60.0))
    task = await store.get_task(submitted.task_id)
    assert task is not None
    assert task.process_state is ProcessState.PENDING
    assert task.not_before == task.created_at + timedelta(seconds=60)
    assert await store.next_due() == task.not_before

    fake_clock.advance(59.0)
    assert await claimable(store) == []
    fake_clock.advance(1.0)
    assert await claimable(store) == [task.id]


async def test_not_before_and_delays_in_a_batch_each_keep_their_own_time(
    store: Store, fake_clock: FakeClock
) -> None:
    start = fake_clock.now()
    at = replace(new_task(key="at"), not_before=start + timedelta(seconds=30))
    soon = replace(new_task(key="soon"), delay=10.0, deadline=5.0)
    plain = new_task(key="plain")
    ids = [s.task_id for s in await store.submit_tasks([at, soon, plain])]
    tasks = [await store.get_task(task_id) for task_id in ids]

    assert [t.not_before for t in tasks if t] == [
        start + timedelta(seconds=30),
        start + timedelta(seconds=10),
        start,
    ]
    # A deadline counts from when the task is due.
    assert [t.deadline for t in tasks if t] == [None, start + timedelta(seconds=15), None]
    assert await claimable(store) == [ids[2]]


async def test_a_repeated_key_returns_the_first_task_whatever_its_delay(store: Store) -> None:
    first = await store.submit_task(replace(new_task(key="k"), delay=60.0))
    again = await store.submit_task(replace(new_task(key="k"), delay=1.0, deadline=3.0))

    assert (again.task_id, again.created) == (first.task_id, False)
    task = await store.get_task(first.task_id)
    assert task is not None
    assert task.deadline is None
    assert task.not_before == task.created_at + timedelta(seconds=60)


async def test_an_overdue_task_is_cancelled_pending_or_processing_and_only_then(
    store: Store, fake_clock: FakeClock
) -> None:
    lease = await leadership(store)
    (errored_id,) = await tasks_in_error(store, 1, keyed=False)
    running_id = (await store.submit_task(replace(new_task(key="r"), deadline=10.0))).task_id
    (claimed,) = await store.claim_tasks(locked_by="s2", limit=10)
    await store.start_step(step_start(claimed))
    waiting_id = (await store.submit_task(replace(new_task(key="w"), deadline=10.0))).task_id
    late_id = (await store.submit_task(replace(new_task(key="l"), deadline=11.0))).task_id

    assert await store.next_deadline() == fake_clock.now() + timedelta(seconds=10)
    fake_clock.advance(9.5)
    assert await store.cancel_overdue(leader=lease, limit=100) == []
    fake_clock.advance(0.5)
    cancelled = await store.cancel_overdue(leader=lease, limit=100)

    assert sorted(t.id for t in cancelled) == sorted([claimed.id, waiting_id])
    assert claimed.id == running_id
    for task in cancelled:
        assert task.process_state is ProcessState.COMPENSATING
        assert task.cancel_requested
        assert task.locked_by is None
        assert task.error["reason"] == DEADLINE_PASSED
    after = await store.get_task(claimed.id)
    assert after is not None
    assert after.lock_epoch == claimed.lock_epoch + 1  # its owner is fenced off
    assert await store.held_requests([claimed.id]) == []
    history = await store.task_events(claimed.id)
    assert history[-1].kind == "cancel_requested"
    assert history[-1].detail["reason"] == DEADLINE_PASSED
    errored = await store.get_task(errored_id)
    assert errored is not None
    assert errored.process_state is ProcessState.ERROR
    # Cancelled once: the next scans find nothing more until the later deadline.
    assert await store.cancel_overdue(leader=lease, limit=100) == []
    assert await store.next_deadline() == fake_clock.now() + timedelta(seconds=1)
    fake_clock.advance(1.0)
    assert [t.id for t in await store.cancel_overdue(leader=lease, limit=100)] == [late_id]
    assert await store.next_deadline() is None  # none left to cancel


async def test_cancel_overdue_is_fenced_by_leadership(store: Store, fake_clock: FakeClock) -> None:
    old = await leadership(store, holder="a", ttl=5.0)
    task_id = (await store.submit_task(replace(new_task(), deadline=1.0))).task_id
    fake_clock.advance(6.0)
    await leadership(store, holder="b", ttl=5.0)

    assert await store.cancel_overdue(leader=old, limit=100) == []
    task = await store.get_task(task_id)
    assert task is not None
    assert task.process_state is ProcessState.PENDING
