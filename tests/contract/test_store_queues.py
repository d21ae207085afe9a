"""Request and reply queues: the outbox, visibility leases, acknowledgements."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from shepherd.core.states import ProcessState, StepKind, StepState
from support.factories import claimed_task, step_start, supervisor_reset, taken_request

if TYPE_CHECKING:
    from shepherd.store.contract import Store
    from shepherd.testing import FakeClock


async def test_start_step_records_the_step_and_enqueues_its_request_together(
    store: Store, fake_clock: FakeClock
) -> None:
    task = await claimed_task(store, locked_by="s1")

    complete_by = await store.start_step(
        step_start(task, seq=1, agent="a", payload={"amount": 5}, within=4.0, undo="u")
    )

    assert abs((complete_by - fake_clock.now()).total_seconds() - 4.0) < 1e-3
    after = await store.get_task(task.id)
    assert after is not None
    (step,) = after.steps
    assert (step.seq, step.agent, step.state, step.attempt, step.request, step.undo) == (
        1,
        "a",
        StepState.RUNNING,
        1,
        {"amount": 5},
        "u",
    )
    request = await taken_request(store, agent="a")
    assert (request.task_id, request.seq, request.attempt, request.lock_epoch) == (
        task.id,
        1,
        1,
        task.lock_epoch,
    )
    assert request.payload == {"amount": 5}
    assert request.kind is StepKind.FORWARD
    assert request.complete_by == complete_by
    # The owner's claim lasts at least as long as the step it waits for.
    assert after.complete_by is not None
    assert after.complete_by >= complete_by


async def test_take_requests_leases_a_request_to_one_worker(store: Store) -> None:
    task = await claimed_task(store, locked_by="s1")
    await store.start_step(step_start(task, seq=1, agent="a"))

    first = await store.take_requests(agents=["a"], worker="w1", limit=10)
    second = await store.take_requests(agents=["a"], worker="w2", limit=10)

    assert len(first) == 1
    assert second == []


async def test_take_requests_only_returns_the_named_agents(store: Store) -> None:
    task = await claimed_task(store, locked_by="s1")
    await store.start_step(step_start(task, seq=1, agent="a"))

    assert await store.take_requests(agents=["b", "c"], worker="w1", limit=10) == []
    assert len(await store.take_requests(agents=["b", "a"], worker="w1", limit=10)) == 1


async def test_take_requests_respects_the_limit_in_order(store: Store) -> None:
    tasks = [await claimed_task(store, locked_by="s1") for _ in range(3)]
    for task in tasks:
        await store.start_step(step_start(task, seq=1, agent="a"))

    first = await store.take_requests(agents=["a"], worker="w1", limit=2)
    rest = await store.take_requests(agents=["a"], worker="w2", limit=2)

    assert [r.task_id for r in first + rest] == [t.id for t in tasks]


async def test_an_expired_request_is_not_taken(store: Store, fake_clock: FakeClock) -> None:
    task = await claimed_task(store, locked_by="s1")
    await store.start_step(step_start(task, seq=1, agent="a", within=2.0))

    fake_clock.advance(2.5)

    assert await store.take_requests(agents=["a"], worker="w1", limit=10) == []


async def test_reply_and_ack_writes_the_reply_once(store: Store) -> None:
    task = await claimed_task(store, locked_by="s1")
    await store.start_step(step_start(task, seq=1, agent="a"))
    request = await taken_request(store, agent="a")

    assert await store.reply_and_ack(request, worker="w1", ok=True, body={"r": 1})
    assert not await store.reply_and_ack(request, worker="w1", ok=True, body={"r": 2})

    taken = await store.record_replies(locked_by="s1", limit=10)
    assert [(r.body, ok) for r, ok in taken] == [({"r": 1}, True)]


async def test_reply_and_ack_of_a_superseded_request_returns_false(store: Store) -> None:
    task = await claimed_task(store, locked_by="s1")
    await store.start_step(step_start(task, seq=1, agent="a", attempt=1))
    old = await taken_request(store, agent="a", worker="w1")
    await store.start_step(step_start(task, seq=1, agent="a", attempt=2))

    assert not await store.reply_and_ack(old, worker="w1", ok=True, body={"stale": True})

    assert await store.record_replies(locked_by="s1", limit=10) == []
    new = await taken_request(store, agent="a", worker="w2")
    assert new.attempt == 2


async def test_reply_and_ack_by_another_worker_returns_false(store: Store) -> None:
    task = await claimed_task(store, locked_by="s1")
    await store.start_step(step_start(task, seq=1, agent="a"))
    request = await taken_request(store, agent="a", worker="w1")

    assert not await store.reply_and_ack(request, worker="w2", ok=True, body=1)
    assert await store.reply_and_ack(request, worker="w1", ok=True, body=1)


async def test_reply_and_ack_after_complete_by_returns_false(
    store: Store, fake_clock: FakeClock
) -> None:
    task = await claimed_task(store, locked_by="s1")
    await store.start_step(step_start(task, seq=1, agent="a", within=2.0))
    request = await taken_request(store, agent="a")

    fake_clock.advance(2.5)

    assert not await store.reply_and_ack(request, worker="w1", ok=True, body=1)
    assert await store.record_replies(locked_by="s1", limit=10) == []


async def test_reply_and_ack_after_a_supervisor_reset_returns_false(
    store: Store, fake_clock: FakeClock
) -> None:
    task = await claimed_task(store, locked_by="s1")
    await store.start_step(step_start(task, seq=1, agent="a", within=100.0))
    request = await taken_request(store, agent="a")
    await supervisor_reset(store, fake_clock, task)
    await store.claim_tasks(locked_by="s2", limit=10)

    assert not await store.reply_and_ack(request, worker="w1", ok=True, body=1)
    assert await store.record_replies(locked_by="s2", limit=10) == []


async def test_record_replies_marks_steps_completed_or_failed_exactly_once(store: Store) -> None:
    task = await claimed_task(store, locked_by="s1")
    await store.start_step(step_start(task, seq=1, agent="a"))
    await store.start_step(step_start(task, seq=2, agent="b"))
    first = await taken_request(store, agent="a")
    second = await taken_request(store, agent="b")
    assert await store.reply_and_ack(first, worker="w1", ok=True, body={"r": 1})
    assert await store.reply_and_ack(second, worker="w1", ok=False, body={"message": "no"})

    taken = await store.record_replies(locked_by="s1", limit=10)

    assert sorted((r.seq, r.ok, ok) for r, ok in taken) == [(1, True, True), (2, False, True)]
    after = await store.get_task(task.id)
    assert after is not None
    assert [(s.seq, s.state, s.result, s.error) for s in after.steps] == [
        (1, StepState.COMPLETED, {"r": 1}, None),
        (2, StepState.FAILED, None, {"message": "no"}),
    ]
    kinds = [e.kind for e in await store.task_events(task.id)]
    assert kinds.count("step_completed") == 1
    assert kinds.count("step_failed") == 1
    assert await store.record_replies(locked_by="s1", limit=10) == []


async def test_record_replies_leaves_other_owners_replies(store: Store) -> None:
    mine = await claimed_task(store, locked_by="s1")
    theirs = await claimed_task(store, locked_by="s2")
    for task in (mine, theirs):
        await store.start_step(step_start(task, seq=1, agent="a"))
        request = await taken_request(store, agent="a")
        assert await store.reply_and_ack(request, worker="w1", ok=True, body=task.id)

    assert [r.task_id for r, _ in await store.record_replies(locked_by="s1", limit=10)] == [mine.id]
    assert [r.task_id for r, _ in await store.record_replies(locked_by="s2", limit=10)] == [
        theirs.id
    ]


async def test_an_ended_task_withdraws_its_requests(store: Store) -> None:
    task = await claimed_task(store, locked_by="s1")
    await store.start_step(step_start(task, seq=1, agent="a"))

    await store.fail_task(
        task.id,
        locked_by="s1",
        epoch=task.lock_epoch,
        state=ProcessState.ERROR,
        error={"reason": "bug"},
    )

    assert await store.take_requests(agents=["a"], worker="w1", limit=10) == []


async def test_a_late_reply_never_acknowledges_a_newer_request_given_the_same_id(
    store: Store,
) -> None:
    # SQLite gives a deleted request's id to the next one queued: the same worker may
    # hold that newer request while a retry of its older reply is still on its way.
    task = await claimed_task(store, locked_by="s1")
    await store.start_step(step_start(task, seq=1, agent="a"))
    old = await taken_request(store, agent="a", worker="w1")
    assert await store.reply_and_ack(old, worker="w1", ok=True, body=1)
    await store.record_replies(locked_by="s1", limit=10)
    await store.start_step(step_start(task, seq=2, agent="a"))
    new = await taken_request(store, agent="a", worker="w1")

    late = replace(old, id=new.id)  # what a retry of the first reply looks like then
    assert not await store.reply_and_ack(late, worker="w1", ok=True, body=1)

    assert await store.reply_and_ack(new, worker="w1", ok=True, body=2)
    taken = await store.record_replies(locked_by="s1", limit=10)
    assert [(r.seq, r.body, ok) for r, ok in taken] == [(2, 2, True)]
