"""`reply_then`: replies made in this process and their workflow's next write, in one transaction.

The replies are written as `reply_and_ack` writes them (recorded on their
steps, for the holder in the worker's own process); the next write (a step's
start, or the finish) only if every reply counted. A stale reply (an older
claim, a superseded attempt, a request no longer the worker's) records
nothing and starts nothing.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING

from shepherd.core.records import Reply, Request
from shepherd.core.states import ProcessState, StepState
from shepherd.errors import PayloadError, StaleEpochError
from shepherd.store.ops import FailTask, FinishTask, ReplyAndAck, StartCompensation, StartStep
from support.factories import claimed_task, step_start, taken_request

if TYPE_CHECKING:
    from shepherd.core.records import JsonValue, Task
    from shepherd.store.contract import Store
    from shepherd.testing import FakeClock


def _reply(
    request: Request, body: JsonValue, *, ok: bool = True, worker: str = "w1"
) -> ReplyAndAck:
    return ReplyAndAck(request, worker=worker, ok=ok, body=body, recorder="s1")


async def _first_step(store: Store) -> tuple[Task, Request]:
    task = await claimed_task(store, locked_by="s1")
    await store.start_step(step_start(task, seq=1, agent="a"))
    return task, await taken_request(store, agent="a")


async def _states(store: Store, task_id: str) -> list[tuple[int, StepState, int]]:
    task = await store.get_task(task_id)
    assert task is not None
    return [(s.seq, s.state, s.attempt) for s in task.steps]


async def test_a_current_reply_is_recorded_and_the_next_step_starts(store: Store) -> None:
    task, request = await _first_step(store)

    went = await store.reply_then(
        [_reply(request, {"n": 1})], then=StartStep(step_start(task, seq=2))
    )

    (answer,) = went.replies
    assert isinstance(answer, Reply)
    assert (answer.seq, answer.ok, answer.body) == (1, True, {"n": 1})
    assert isinstance(went.then, datetime)
    stored = await store.get_task(task.id)
    assert stored is not None
    assert [(s.seq, s.state, s.result) for s in stored.steps] == [
        (1, StepState.COMPLETED, {"n": 1}),
        (2, StepState.RUNNING, None),
    ]
    (queued,) = await store.take_requests(agents=["a"], worker="w1", limit=10)
    assert queued.seq == 2
    kinds = [e.kind for e in await store.task_events(task.id)]
    assert kinds.count("step_completed") == 1


async def test_the_next_step_may_go_straight_to_the_worker(store: Store) -> None:
    task, request = await _first_step(store)
    start = replace(step_start(task, seq=2), taken_by="w1")

    went = await store.reply_then([_reply(request, 1)], then=StartStep(start))

    assert isinstance(went.then, Request)
    assert (went.then.seq, went.then.task_id) == (2, task.id)
    # Leased to w1 as it was queued: no other worker sees it.
    assert await store.take_requests(agents=["a"], worker="w2", limit=10) == []


async def test_a_current_reply_and_the_finish(store: Store) -> None:
    task, request = await _first_step(store)
    finish = FinishTask(task.id, locked_by="s1", epoch=task.lock_epoch, result="done")

    went = await store.reply_then([_reply(request, 1)], then=finish)

    assert isinstance(went.replies[0], Reply)
    assert went.then is None
    stored = await store.get_task(task.id)
    assert stored is not None
    assert (stored.process_state, stored.result) == (ProcessState.PROCESSED, "done")
    assert [s.state for s in stored.steps] == [StepState.COMPLETED]


async def test_a_failure_reply_counts_as_the_failure_it_was_handed_over_as(store: Store) -> None:
    task, request = await _first_step(store)
    error = {"type": "Declined", "message": "no"}
    finish = FinishTask(task.id, locked_by="s1", epoch=task.lock_epoch, result="handled")

    went = await store.reply_then([_reply(request, error, ok=False)], then=finish)

    assert isinstance(went.replies[0], Reply)
    assert went.replies[0].ok is False
    assert went.then is None
    assert await _states(store, task.id) == [(1, StepState.FAILED, 1)]


async def test_several_replies_of_one_task_go_with_its_next_write(store: Store) -> None:
    task = await claimed_task(store, locked_by="s1")
    for seq in (1, 2):
        await store.start_step(step_start(task, seq=seq, agent="a"))
    taken = await store.take_requests(agents=["a"], worker="w1", limit=10)
    assert len(taken) == 2

    went = await store.reply_then(
        [_reply(r, r.seq) for r in taken], then=StartStep(step_start(task, seq=3))
    )

    assert [isinstance(a, Reply) for a in went.replies] == [True, True]
    assert await _states(store, task.id) == [
        (1, StepState.COMPLETED, 1),
        (2, StepState.COMPLETED, 1),
        (3, StepState.RUNNING, 1),
    ]


async def test_a_reply_of_an_older_claim_records_nothing_and_starts_nothing(store: Store) -> None:
    first, request = await _first_step(store)
    # The holder lets the task go and claims it again: a newer epoch, same name.
    await store.release_tasks([first.id], locked_by="s1")
    (again,) = await store.claim_tasks(locked_by="s1", limit=10)
    assert again.lock_epoch > first.lock_epoch

    went = await store.reply_then([_reply(request, 1)], then=StartStep(step_start(again, seq=2)))

    assert not isinstance(went.replies[0], Reply)
    assert isinstance(went.then, StaleEpochError)
    assert await _states(store, first.id) == [(1, StepState.RUNNING, 1)]
    assert await store.take_requests(agents=["a"], worker="w1", limit=10) == []


async def test_a_reply_of_a_superseded_attempt_records_nothing_and_starts_nothing(
    store: Store,
) -> None:
    task, old = await _first_step(store)
    await store.start_step(step_start(task, seq=1, agent="a", attempt=2))
    finish = FinishTask(task.id, locked_by="s1", epoch=task.lock_epoch, result="done")

    went = await store.reply_then([_reply(old, 1)], then=finish)

    assert went.replies == (False,)
    assert isinstance(went.then, StaleEpochError)
    stored = await store.get_task(task.id)
    assert stored is not None
    assert stored.process_state is ProcessState.PROCESSING
    assert await _states(store, task.id) == [(1, StepState.RUNNING, 2)]


async def test_a_reply_to_a_request_no_longer_the_workers_records_nothing(store: Store) -> None:
    task, request = await _first_step(store)

    went = await store.reply_then(
        [_reply(request, 1, worker="w2")], then=StartStep(step_start(task, seq=2))
    )

    assert went.replies == (False,)
    assert isinstance(went.then, StaleEpochError)
    assert await _states(store, task.id) == [(1, StepState.RUNNING, 1)]
    # The request is still w1's to answer.
    assert isinstance(
        await store.reply_and_ack(request, worker="w1", ok=True, body=1, recorder="s1"), Reply
    )


async def test_one_stale_reply_holds_back_the_write_of_its_own_task_only(store: Store) -> None:
    stale_task, stale = await _first_step(store)
    other = await claimed_task(store, locked_by="s1")
    await store.start_step(step_start(other, seq=1, agent="b"))
    current = await taken_request(store, agent="b")

    stale_went, went = await asyncio.gather(
        store.reply_then(
            [_reply(stale, 1, worker="w2")], then=StartStep(step_start(stale_task, seq=2))
        ),
        store.reply_then([_reply(current, 2)], then=StartStep(step_start(other, seq=2))),
    )

    assert isinstance(stale_went.then, StaleEpochError)
    assert isinstance(went.then, datetime)
    assert await _states(store, stale_task.id) == [(1, StepState.RUNNING, 1)]
    assert await _states(store, other.id) == [
        (1, StepState.COMPLETED, 1),
        (2, StepState.RUNNING, 1),
    ]


async def test_a_refusal_and_the_start_of_the_compensation(store: Store) -> None:
    task, request = await _first_step(store)
    error = {"type": "Declined", "message": "no"}
    compensate = StartCompensation(
        task.id, locked_by="s1", epoch=task.lock_epoch, error={"reason": "refused"}
    )

    went = await store.reply_then([_reply(request, error, ok=False)], then=compensate)

    assert isinstance(went.replies[0], Reply)
    assert went.then is None
    stored = await store.get_task(task.id)
    assert stored is not None
    assert stored.process_state is ProcessState.COMPENSATING
    assert stored.locked_by == "s1"
    assert [s.state for s in stored.steps] == [StepState.FAILED]


async def test_a_reply_and_the_tasks_failure(store: Store) -> None:
    task, request = await _first_step(store)
    fail = FailTask(
        task.id,
        locked_by="s1",
        epoch=task.lock_epoch,
        state=ProcessState.ERROR,
        error={"reason": "the workflow raised"},
    )

    went = await store.reply_then([_reply(request, 1)], then=fail)

    assert isinstance(went.replies[0], Reply)
    assert went.then is None
    stored = await store.get_task(task.id)
    assert stored is not None
    assert stored.process_state is ProcessState.ERROR
    assert [s.state for s in stored.steps] == [StepState.COMPLETED]


async def test_a_stale_reply_fails_no_task(store: Store) -> None:
    task, old = await _first_step(store)
    await store.start_step(step_start(task, seq=1, agent="a", attempt=2))
    fail = FailTask(
        task.id,
        locked_by="s1",
        epoch=task.lock_epoch,
        state=ProcessState.ERROR,
        error={"reason": "the workflow raised"},
    )

    went = await store.reply_then([_reply(old, 1)], then=fail)

    assert went.replies == (False,)
    assert isinstance(went.then, StaleEpochError)
    stored = await store.get_task(task.id)
    assert stored is not None
    assert stored.process_state is ProcessState.PROCESSING


async def test_a_reply_whose_next_step_cannot_start_still_moves_the_claim(
    store: Store, fake_clock: FakeClock
) -> None:
    # A start moves its task's claim itself, so its reply's touch may be left to it:
    # when the start fails after all, the reply's touch is written still.
    task, request = await _first_step(store)
    started = await store.get_task(task.id)
    assert started is not None
    assert started.complete_by is not None
    fake_clock.advance(5.0)  # the touch (now + complete_within, 30 s) outruns the step's claim
    unencodable = step_start(task, seq=2, payload={"x": float("nan")})

    went = await store.reply_then([_reply(request, 1)], then=StartStep(unencodable))

    assert isinstance(went.replies[0], Reply)
    assert isinstance(went.then, PayloadError)
    stored = await store.get_task(task.id)
    assert stored is not None
    assert [s.state for s in stored.steps] == [StepState.COMPLETED]
    assert stored.complete_by is not None
    assert stored.complete_by > started.complete_by  # touched by the reply
