"""A keyed step's start handed to its key's owner (`OwnerTake`): taken by the owner's worker
in the start's own transaction only behind the owner's fence, else queued as before.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING

from shepherd.core.records import Reply, Request
from shepherd.core.states import StepState
from shepherd.store import signals as ch
from shepherd.store.ops import AnswerOwned, OwnerTake, ReplyAndAck, StartStep
from support.factories import claimed_task, step_start, submitted_task

if TYPE_CHECKING:
    from shepherd.core.records import Task
    from shepherd.store.contract import StepStart, Store
    from shepherd.testing import FakeClock

AGENT = "ledger"
LEASE = 10.0


def keyed(task: Task, key: str = "u1", *, seq: int = 1) -> StepStart:
    start = step_start(task, seq=seq, agent=AGENT, within=60.0, payload={"user": key, "s": seq})
    return replace(start, owner_key=key)


async def own(store: Store, owner: str, key: str = "u1") -> int:
    (taken,) = await store.take_keys(AGENT, [key], owner=owner, lease=LEASE)
    return taken.lease.epoch


async def take(store: Store, owner: str, epoch: int, worker: str) -> list[Request]:
    steps, calls, given_up = await store.take_key_work(
        AGENT, "u1", owner=owner, epoch=epoch, worker=worker, limit=10
    )
    assert (calls, given_up) == ([], [])
    return steps


async def waiting(store: Store) -> int:
    """The key's step requests no handling has taken."""
    return (await store.key_backlogs(AGENT)).get("u1", (0, None))[0]


async def another_task(store: Store) -> Task:
    await submitted_task(store)
    (task,) = await store.claim_tasks(locked_by="s1", limit=10)
    return task


async def test_the_owner_with_no_earlier_request_of_its_key_takes_the_step_as_it_starts(
    store: Store,
) -> None:
    task = await claimed_task(store, locked_by="s1")
    epoch = await own(store, "p1")
    wake = store.signals.event(ch.CALLS)

    started = await store.start_step_owned(
        keyed(task), take=OwnerTake(worker="p1/a", owner="p1", epoch=epoch)
    )

    assert isinstance(started, Request)
    assert (started.task_id, started.seq, started.payload) == (task.id, 1, {"user": "u1", "s": 1})
    assert not wake.is_set()  # no owner is woken for it
    assert await waiting(store) == 0  # taken: it waits for no handling
    # Held by the owner's worker: another owner takes nothing, the owner takes it again.
    assert await take(store, "p2", epoch, "p2/a") == []
    assert [r.id for r in await take(store, "p1", epoch, "p1/a")] == [started.id]
    # A request of the key its worker holds does not hold the next one back.
    second = await store.start_step_owned(
        keyed(await another_task(store)), take=OwnerTake(worker="p1/a", owner="p1", epoch=epoch)
    )
    assert isinstance(second, Request)
    assert second.id > started.id
    after = await store.get_task(task.id)
    assert after is not None
    assert [(s.seq, s.state) for s in after.steps] == [(1, StepState.RUNNING)]


async def test_a_stale_owner_gets_the_step_queued_not_taken(
    store: Store, fake_clock: FakeClock
) -> None:
    task = await claimed_task(store, locked_by="s1")
    epoch = await own(store, "p1")
    wake = store.signals.event(ch.CALLS)

    # Not the owner's epoch: queued for the key's owner, and the owners are woken.
    stale = OwnerTake(worker="p1/a", owner="p1", epoch=epoch + 1)
    started = await store.start_step_owned(keyed(task), take=stale)
    assert isinstance(started, datetime)
    assert wake.is_set()
    assert await waiting(store) == 1
    # Not the owner: queued too.
    other = await another_task(store)
    assert isinstance(
        await store.start_step_owned(
            keyed(other), take=OwnerTake(worker="p2/a", owner="p2", epoch=epoch)
        ),
        datetime,
    )
    assert await waiting(store) == 2
    (first, second) = await take(store, "p1", epoch, "p1/a")
    assert [first.task_id, second.task_id] == [task.id, other.id]

    # The owner's lease lapsed (its process paused): queued, though nothing waits before it.
    third = await another_task(store)
    fake_clock.advance(LEASE + 1)
    lapsed = OwnerTake(worker="p1/a", owner="p1", epoch=epoch)
    assert isinstance(await store.start_step_owned(keyed(third), take=lapsed), datetime)
    assert await waiting(store) == 1


async def test_a_step_behind_a_waiting_request_of_its_key_is_queued_not_taken(
    store: Store, fake_clock: FakeClock
) -> None:
    task = await claimed_task(store, locked_by="s1")
    await store.start_step(keyed(task))  # queued before the key had an owner
    epoch = await own(store, "p1")
    later = await another_task(store)

    started = await store.start_step_owned(
        keyed(later), take=OwnerTake(worker="p1/a", owner="p1", epoch=epoch)
    )

    assert isinstance(started, datetime)
    assert await waiting(store) == 2
    assert [r.task_id for r in await take(store, "p1", epoch, "p1/a")] == [task.id, later.id]

    # A request a dead owner's worker held waits before it too: the new owner takes
    # it first, then the next, in the order queued.
    fake_clock.advance(LEASE + 1)  # p1 died; the steps' windows (60 s) have not passed
    newest = await own(store, "p2")
    third = await another_task(store)
    handed = await store.start_step_owned(
        keyed(third), take=OwnerTake(worker="p2/a", owner="p2", epoch=newest)
    )
    assert isinstance(handed, datetime)
    taken = await take(store, "p2", newest, "p2/a")
    assert [r.task_id for r in taken] == [task.id, later.id, third.id]


async def test_a_handed_start_rides_with_the_owners_reply(store: Store) -> None:
    task = await claimed_task(store, locked_by="s1")
    epoch = await own(store, "p1")
    fence = OwnerTake(worker="p1/a", owner="p1", epoch=epoch)
    first = await store.start_step_owned(keyed(task), take=fence)
    assert isinstance(first, Request)
    reply = ReplyAndAck(first, worker="p1/a", ok=True, body={"n": 1}, recorder="s1")
    owned = AnswerOwned(
        AGENT, "u1", owner="p1", epoch=epoch, answers=[], set_state=True, state={"c": 1}
    )

    went = await store.reply_then(
        [reply], then=StartStep(replace(keyed(task, seq=2), taken_by=fence)), owned=[owned]
    )

    (answer,) = went.replies
    assert isinstance(answer, Reply)
    assert isinstance(went.then, Request)  # its own reply gone, nothing waits before it
    assert (went.then.seq, went.then.payload) == (2, {"user": "u1", "s": 2})
    assert await waiting(store) == 0
