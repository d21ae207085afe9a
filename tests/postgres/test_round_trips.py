"""One round trip per writer transaction: every read of a batch goes in one pipeline.

The writer counts, per committed batch, the times it waited for the server
before the commit (`round_trips` in `statistics()`). A batch of each hot kind
of operation, and a batch mixing them all, waits once, then commits: the
handlers send their reads first, all of them, and write once the answers are
back (`store.postgres.phases`). Counts, not times.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import replace
from datetime import datetime
from typing import Any

import pytest

from shepherd.core.records import Reply, Request, Task
from shepherd.store.ops import FinishTask, ReplyAndAck, StartStep
from shepherd.store.postgres import PostgresStore
from support.factories import new_task, step_start
from support.postgres import OpenStore

pytestmark = pytest.mark.postgres


async def _one_batch(store: PostgresStore, *calls: Awaitable[Any]) -> tuple[list[Any], int]:
    """Run `calls` in one batch: their outcomes, and the round trips it made before its commit."""
    before = store.statistics()
    outcomes = await asyncio.gather(*calls)
    after = store.statistics()
    assert after["batches"] - before["batches"] == 1, "the calls did not share one batch"
    assert after["commits"] - before["commits"] == 1
    return list(outcomes), int(after["round_trips"] - before["round_trips"])


async def _claimed(store: PostgresStore, owner: str, n: int) -> list[Task]:
    for i in range(n):
        await store.submit_task(new_task(data=i))
    claimed = await store.claim_tasks(locked_by=owner, limit=n)
    assert len(claimed) == n
    return claimed


@pytest.fixture
async def pg(open_store: OpenStore) -> PostgresStore:
    """A store on the database's clock, as in production (the clock is one more read)."""
    store = await open_store()
    assert store.database_clock
    return store


async def test_a_batch_of_each_hot_kind_waits_once_before_its_commit(pg: PostgresStore) -> None:
    submitted, trips = await _one_batch(
        pg, pg.submit_task(new_task(key="k1")), pg.submit_task(new_task(key="k2"))
    )
    assert trips == 1
    assert all(s.created for s in submitted)
    # A key already taken answers with its task, in the same round trip.
    (again,), trips = await _one_batch(pg, pg.submit_task(new_task(key="k1")))
    assert trips == 1
    assert (again.task_id, again.created) == (submitted[0].task_id, False)

    (mine, theirs), trips = await _one_batch(
        pg, pg.claim_tasks(locked_by="s1", limit=1), pg.claim_tasks(locked_by="s2", limit=1)
    )
    assert trips == 1
    assert len(mine) == len(theirs) == 1
    t1, t2 = mine[0], theirs[0]

    _, trips = await _one_batch(
        pg, pg.start_step(step_start(t1, seq=1)), pg.start_step(step_start(t2, seq=1))
    )
    assert trips == 1

    (taken,), trips = await _one_batch(pg, pg.take_requests(agents=["a"], worker="w1", limit=10))
    assert trips == 1
    assert len(taken) == 2
    by_task = {r.task_id: r for r in taken}

    _, trips = await _one_batch(
        pg,
        pg.reply_and_ack(by_task[t1.id], worker="w1", ok=True, body=1, recorder="s1"),
        pg.reply_and_ack(by_task[t2.id], worker="w1", ok=True, body=2),  # queued
    )
    assert trips == 1

    (recorded,), trips = await _one_batch(pg, pg.record_replies(locked_by="s2", limit=10))
    assert trips == 1
    assert [(r.task_id, ok) for r, ok in recorded] == [(t2.id, True)]

    _, trips = await _one_batch(
        pg,
        pg.finish_task(t1.id, locked_by="s1", epoch=t1.lock_epoch, result=1),
        pg.finish_task(t2.id, locked_by="s2", epoch=t2.lock_epoch, result=2),
    )
    assert trips == 1
    for task_id in (t1.id, t2.id):
        task = await pg.get_task(task_id)
        assert task is not None
        assert task.process_state == "processed"


async def test_a_batch_mixing_every_hot_kind_waits_once_before_its_commit(
    pg: PostgresStore,
) -> None:
    await pg.register_worker("w1", host="h", pid=1, roles=("scheduler",), agents=("a",))
    replying, recording, starting, ending, going = await _claimed(pg, "s1", 5)
    for task in (replying, recording, going):
        await pg.start_step(step_start(task, seq=1))
    taken = {r.task_id: r for r in await pg.take_requests(agents=["a"], worker="w1", limit=10)}
    await pg.reply_and_ack(taken[recording.id], worker="w1", ok=True, body="queued")
    await pg.submit_task(new_task(data="to claim"))
    await pg.start_step(step_start(starting, seq=1, agent="b"))  # a request for agent b

    outcomes, trips = await _one_batch(
        pg,
        pg.submit_task(new_task(key="mixed")),
        pg.claim_tasks(locked_by="s2", limit=10),
        pg.take_requests(agents=["b"], worker="w2", limit=10),
        pg.take_calls(worker="w2", agents=["b"], limit=10),  # none waiting
        pg.reply_and_ack(taken[replying.id], worker="w1", ok=True, body="local", recorder="s1"),
        pg.record_replies(locked_by="s1", limit=10),
        pg.start_step(step_start(ending, seq=1)),
        pg.finish_task(starting.id, locked_by="s1", epoch=starting.lock_epoch, result="done"),
        pg.beat_worker("w1"),
        pg.acquire_lease("supervisor", holder="sup", ttl=60.0),
        pg.reply_then(
            [ReplyAndAck(taken[going.id], worker="w1", ok=True, body=1, recorder="s1")],
            then=StartStep(step_start(going, seq=2)),
        ),
    )

    assert trips == 1
    submitted, claimed, took, calls, answered, recorded, _, _, beaten, lease, went = outcomes
    assert isinstance(went.replies[0], Reply)
    assert isinstance(went.then, datetime)
    assert calls == ([], [])
    assert submitted.created
    assert [t.input for t in claimed] == ["to claim"]
    assert [r.task_id for r in took] == [starting.id]
    assert answered is not None
    assert answered is not False
    assert [(reply.task_id, was_recorded) for reply, was_recorded in recorded] == [
        (recording.id, True)
    ]
    assert beaten is True
    assert lease is not None
    done = await pg.get_task(starting.id)
    assert done is not None
    assert done.process_state == "processed"
    for task in (replying, recording):
        found = await pg.get_task(task.id)
        assert found is not None
        assert found.steps[0].state == "completed"


async def test_a_batch_of_replies_with_their_next_writes_waits_once_before_its_commit(
    pg: PostgresStore,
) -> None:
    starting, ending = await _claimed(pg, "s1", 2)
    for task in (starting, ending):
        await pg.start_step(step_start(task, seq=1))
    taken = {r.task_id: r for r in await pg.take_requests(agents=["a"], worker="w1", limit=10)}

    def reply(task: Task) -> ReplyAndAck:
        return ReplyAndAck(taken[task.id], worker="w1", ok=True, body=1, recorder="s1")

    next_step = replace(step_start(starting, seq=2), taken_by="w1")
    finish = FinishTask(ending.id, locked_by="s1", epoch=ending.lock_epoch, result="done")
    (started, finished), trips = await _one_batch(
        pg,
        pg.reply_then([reply(starting)], then=StartStep(next_step)),
        pg.reply_then([reply(ending)], then=finish),
    )

    assert trips == 1
    assert isinstance(started.then, Request)
    assert finished.then is None
    assert all(isinstance(answer, Reply) for answer in (*started.replies, *finished.replies))
