"""Steps of an exclusive agent: queued with their key, taken by the key's owner alone in the order
queued, and replied as every step is, fenced by the owner's lease, with its owner state.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING

import psycopg

from shepherd.core.records import Reply
from shepherd.core.states import StepState
from shepherd.errors import StaleEpochError
from shepherd.store.ops import AnswerOwned, ReplyAndAck, StartStep
from shepherd.store.sql.owned_steps import key_lock
from shepherd.testing import wait_until
from support.backends import postgres_only
from support.factories import claimed_task, step_start, submitted_task

if TYPE_CHECKING:
    from shepherd.core.records import JsonValue, Request, Task
    from shepherd.store.contract import Store
    from shepherd.testing import FakeClock
    from support.factories import Stores

AGENT = "ledger"
LEASE = 10.0


async def started(
    store: Store, task: Task, key: str, *, seq: int = 1, within: float = 10.0
) -> None:
    start = step_start(task, seq=seq, agent=AGENT, within=within, payload={"user": key})
    await store.start_step(replace(start, owner_key=key))


async def own(store: Store, key: str, owner: str) -> int:
    (taken,) = await store.take_keys(AGENT, [key], owner=owner, lease=LEASE)
    return taken.lease.epoch


async def work(
    store: Store,
    key: str,
    owner: str,
    epoch: int,
    *,
    worker: str = "p1/a",
    limit: int = 10,
    skip: tuple[Request, ...] = (),
) -> list[Request]:
    steps, calls, given_up = await store.take_key_work(
        AGENT,
        key,
        owner=owner,
        epoch=epoch,
        worker=worker,
        limit=limit,
        skip=[(r.id, r.task_id, r.seq, r.attempt) for r in skip],
    )
    assert (calls, given_up) == ([], [])
    return steps


async def test_a_keys_steps_are_taken_by_its_owner_alone_in_the_order_queued(
    store: Store,
) -> None:
    first = await claimed_task(store, locked_by="s1")
    second = await submitted_task(store)
    (second,) = await store.claim_tasks(locked_by="s2", limit=10)
    await started(store, first, "u1")
    await started(store, second, "u1")
    other = await submitted_task(store)
    (other,) = await store.claim_tasks(locked_by="s3", limit=10)
    await started(store, other, "u2")
    # Agent workers never take a keyed request; the keys wait to be shared out.
    assert await store.take_requests(agents=[AGENT], worker="w", limit=10) == []
    assert await store.waiting_keys(AGENT) == ["u1", "u2"]
    backlogs = await store.key_backlogs(AGENT)
    assert {k: n for k, (n, _) in backlogs.items()} == {"u1": 2, "u2": 1}

    epoch = await own(store, "u1", "p1")
    assert await work(store, "u1", "p2", epoch) == []  # not p2's key
    assert await work(store, "u1", "p1", epoch + 1) == []  # not that epoch
    taken = await work(store, "u1", "p1", epoch, limit=1)
    assert [(r.task_id, r.seq, r.payload) for r in taken] == [(first.id, 1, {"user": "u1"})]
    # Taken again until answered (its reply may have been fenced off), but when skipped.
    assert [r.task_id for r in await work(store, "u1", "p1", epoch)] == [first.id, second.id]
    head = taken[0]
    (after,) = await work(store, "u1", "p1", epoch, skip=(head,))
    assert after.task_id == second.id
    assert await work(store, "u1", "p1", epoch, skip=(head, after)) == []
    # A request with a skipped one's id but another step or attempt is another request.
    assert await work(store, "u1", "p1", epoch, skip=(replace(head, attempt=2), after)) == [head]
    # A taken step no longer waits in its key's backlog.
    assert {k: n for k, (n, _) in (await store.key_backlogs(AGENT)).items()} == {"u2": 1}


async def test_a_new_owner_takes_the_steps_a_dead_owner_held(
    store: Store, fake_clock: FakeClock
) -> None:
    task = await claimed_task(store, locked_by="s1")
    await started(store, task, "u1", within=60.0)
    old = await own(store, "u1", "p1")
    (held,) = await work(store, "u1", "p1", old, worker="p1/a")
    fake_clock.advance(LEASE + 1)  # p1 died: its lease lapses, the step's window has not

    new = await own(store, "u1", "p2")
    (taken,) = await work(store, "u1", "p2", new, worker="p2/a")
    assert (taken.id, taken.attempt) == (held.id, held.attempt)
    # The old owner's reply is refused by its fence and writes nothing.
    late = ReplyAndAck(held, worker="p1/a", ok=True, body={"by": "p1"})
    assert await store.reply_owned(AGENT, "u1", owner="p1", epoch=old, replies=[late]) == (
        False,
        [],
    )
    reply = ReplyAndAck(taken, worker="p2/a", ok=True, body={"by": "p2"}, recorder="s1")
    owned, (recorded,) = await store.reply_owned(
        AGENT, "u1", owner="p2", epoch=new, replies=[reply], state={"count": 1}
    )
    assert owned
    assert isinstance(recorded, Reply)
    assert recorded.body == {"by": "p2"}
    after = await store.get_task(task.id)
    assert after is not None
    (step,) = after.steps
    assert (step.state, step.result) == (StepState.COMPLETED, {"by": "p2"})
    await store.release_keys(AGENT, ["u1"], owner="p2")
    (again,) = await store.take_keys(AGENT, ["u1"], owner="p3", lease=LEASE)
    assert again.state == {"count": 1}
    assert await store.waiting_keys(AGENT) == []


async def test_a_reply_for_a_superseded_attempt_or_a_queued_one_is_written_as_reply_and_ack(
    store: Store,
) -> None:
    task = await claimed_task(store, locked_by="s1")
    await started(store, task, "u1")
    epoch = await own(store, "u1", "p1")
    (request,) = await work(store, "u1", "p1", epoch)
    # A reply for a task held by another scheduler is queued for it, as reply_and_ack does.
    queued = ReplyAndAck(request, worker="p1/a", ok=False, body={"type": "X", "message": "no"})
    assert await store.reply_owned(AGENT, "u1", owner="p1", epoch=epoch, replies=[queued]) == (
        True,
        [True],
    )
    (reply,) = [r for r, current in await store.record_replies(locked_by="s1", limit=10)]
    assert (reply.ok, reply.body) == (False, {"type": "X", "message": "no"})
    # The request is gone: a second reply (the request's lease moved on) counts for nothing.
    assert await store.reply_owned(AGENT, "u1", owner="p1", epoch=epoch, replies=[queued]) == (
        True,
        [False],
    )


@postgres_only()  # SQLite has one writer at a time: its transactions queue one at a time
async def test_a_keys_requests_are_queued_one_transaction_at_a_time(
    stores: Stores, store: Store
) -> None:
    task = await claimed_task(store, locked_by="s1")
    lock = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"
    waiting = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
    async with await psycopg.AsyncConnection.connect(stores.url) as queueing:
        # Another transaction queueing requests of the key holds its lock until it ends:
        # a queueing of the key waits, so that its ids cannot commit out of order.
        await queueing.execute(lock, (key_lock(AGENT, "u1"),))
        start = asyncio.create_task(started(store, task, "u1"))

        async def blocked() -> bool:
            async with await psycopg.AsyncConnection.connect(stores.url) as look:
                (n,) = await (await look.execute(waiting)).fetchone() or (0,)
                return bool(n)

        await wait_until(blocked, timeout=10.0, message="the queueing did not wait")
        assert not start.done()
        await queueing.commit()
        await start
    epoch = await own(store, "u1", "p1")
    assert [r.task_id for r in await work(store, "u1", "p1", epoch)] == [task.id]


def _fence(owner: str, epoch: int, state: JsonValue) -> AnswerOwned:
    return AnswerOwned(
        AGENT, "u1", owner=owner, epoch=epoch, answers=[], set_state=True, state=state
    )


async def test_an_owners_reply_rides_with_the_next_step_start_fenced_by_its_lease(
    store: Store, fake_clock: FakeClock
) -> None:
    task = await claimed_task(store, locked_by="s1")
    await started(store, task, "u1", within=60.0)
    epoch = await own(store, "u1", "p1")
    (request,) = await work(store, "u1", "p1", epoch)
    reply = ReplyAndAck(request, worker="p1/a", ok=True, body={"n": 1}, recorder="s1")

    went = await store.reply_then(
        [reply], then=StartStep(step_start(task, seq=2)), owned=[_fence("p1", epoch, {"c": 1})]
    )

    (answer,) = went.replies
    assert isinstance(answer, Reply)
    assert (answer.seq, answer.body) == (1, {"n": 1})
    assert isinstance(went.then, datetime)  # the next step started in the same transaction
    after = await store.get_task(task.id)
    assert after is not None
    assert [(s.seq, s.state) for s in after.steps] == [
        (1, StepState.COMPLETED),
        (2, StepState.RUNNING),
    ]
    await store.release_keys(AGENT, ["u1"], owner="p1")
    (again,) = await store.take_keys(AGENT, ["u1"], owner="p2", lease=LEASE)
    assert again.state == {"c": 1}  # the owner state, with the reply

    # A stale owner's reply (its lease taken over by p2) writes nothing and starts nothing.
    other = await claimed_task(store, locked_by="s1")
    await started(store, other, "u1", within=60.0)
    (late,) = await work(store, "u1", "p2", again.lease.epoch, worker="p2/a")
    stale = ReplyAndAck(late, worker="p2/a", ok=True, body={"n": 2}, recorder="s1")
    fake_clock.advance(LEASE + 1)  # p2's lease lapses; p3 takes the key over
    newest = await own(store, "u1", "p3")
    went = await store.reply_then(
        [stale],
        then=StartStep(step_start(other, seq=2)),
        owned=[_fence("p2", again.lease.epoch, {"c": 99})],
    )
    assert went.replies == (False,)
    assert isinstance(went.then, StaleEpochError)
    before = await store.get_task(other.id)
    assert before is not None
    assert [(s.seq, s.state) for s in before.steps] == [(1, StepState.RUNNING)]
    await store.release_keys(AGENT, ["u1"], owner="p3")
    (last,) = await store.take_keys(AGENT, ["u1"], owner="p4", lease=LEASE)
    assert last.state == {"c": 1}  # the stale owner's state was not set
    assert newest < last.lease.epoch
