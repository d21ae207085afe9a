"""What waits: queue depths per agent (`queue_depths`), tasks in chosen states (`count_tasks_in`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shepherd.core.records import QueueDepth
from shepherd.core.states import ProcessState
from support.factories import claimed_task, new_task, step_start, taken_request

if TYPE_CHECKING:
    from shepherd.store.contract import Store
    from shepherd.testing import FakeClock


async def test_an_empty_store_has_no_queues(store: Store) -> None:
    assert await store.queue_depths() == []


async def test_requests_count_as_waiting_until_taken_then_taken_until_answered(
    store: Store,
) -> None:
    for n in range(3):
        task = await claimed_task(store, locked_by=f"s{n}")
        await store.start_step(step_start(task, seq=1, agent="a" if n < 2 else "b"))
    taken = await taken_request(store, agent="b")

    assert await store.queue_depths() == [
        QueueDepth(agent="a", requests_waiting=2),
        QueueDepth(agent="b", requests_taken=1),
    ]

    await store.reply_and_ack(taken, worker="w1", ok=True, body={"done": True})

    assert await store.queue_depths() == [QueueDepth(agent="a", requests_waiting=2)]


async def test_a_request_past_its_window_is_in_neither_count(
    store: Store, fake_clock: FakeClock
) -> None:
    task = await claimed_task(store)
    await store.start_step(step_start(task, seq=1, agent="a", within=5.0))
    await taken_request(store, agent="a")
    assert await store.queue_depths() == [QueueDepth(agent="a", requests_taken=1)]

    fake_clock.advance(6.0)

    assert await store.queue_depths() == []


async def test_calls_count_as_waiting_until_taken_and_leave_once_answered(
    store: Store, fake_clock: FakeClock
) -> None:
    for n in range(3):
        await store.send_call(f"c{n}", "quote", {"n": n}, within=5.0, max_attempts=3, expires_in=60)
    (call,), _ = await store.take_calls(worker="w1", agents=["quote"], limit=1)

    assert await store.queue_depths() == [QueueDepth(agent="quote", calls_waiting=2, calls_taken=1)]

    assert await store.answer_call(call.call_id, worker="w1", attempt=1, ok=True, body=1)
    assert await store.queue_depths() == [QueueDepth(agent="quote", calls_waiting=2)]

    # A handling that died: its call is waiting again once its window passed.
    (again,), _ = await store.take_calls(worker="w2", agents=["quote"], limit=1)
    fake_clock.advance(6.0)
    assert await store.queue_depths() == [QueueDepth(agent="quote", calls_waiting=2)]
    assert again.call_id != call.call_id


async def test_calls_of_exclusive_agents_count_beside_plain_calls(store: Store) -> None:
    # A key's calls and plain calls are found through different indexes: both count.
    for n in range(3):
        await store.send_call(
            f"k{n}", "write", {"n": n}, within=5.0, max_attempts=3, expires_in=60, owner_key="csv"
        )
    await store.send_call("p0", "write", {}, within=5.0, max_attempts=3, expires_in=60)
    assert await store.queue_depths() == [QueueDepth(agent="write", calls_waiting=4)]

    (owned,) = await store.take_keys("write", ["csv"], owner="o1", lease=10.0)
    epoch = owned.lease.epoch
    (call,), _ = await store.take_key_calls("write", "csv", owner="o1", epoch=epoch, limit=1)
    assert await store.queue_depths() == [QueueDepth(agent="write", calls_waiting=3, calls_taken=1)]

    answer = [(call.call_id, call.attempt, True, None)]
    assert await store.answer_owned("write", "csv", owner="o1", epoch=epoch, answers=answer)
    assert await store.queue_depths() == [QueueDepth(agent="write", calls_waiting=3)]


async def test_count_tasks_in_counts_only_the_states_asked_for(store: Store) -> None:
    claimed = await claimed_task(store)
    await store.finish_task(claimed.id, locked_by="s1", epoch=claimed.lock_epoch, result=1)
    await store.submit_task(new_task())
    await store.submit_task(new_task())
    open_states = (ProcessState.PENDING, ProcessState.PROCESSING, ProcessState.ERROR)

    assert await store.count_tasks_in(open_states) == {ProcessState.PENDING: 2}
    assert await store.count_tasks_in([ProcessState.PROCESSED]) == {ProcessState.PROCESSED: 1}
    assert await store.count_tasks_in([]) == {}
