"""Claims: each claimable task goes to one owner, bumping `lock_epoch`, once `not_before` passed."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import TYPE_CHECKING

from shepherd.core.states import ProcessState
from support.factories import (
    claimed_task,
    new_task,
    step_start,
    supervisor_reset,
    taken_request,
)

if TYPE_CHECKING:
    from shepherd.store.contract import Store
    from shepherd.testing import FakeClock
    from support.factories import Stores


async def test_claim_takes_a_pending_task_and_bumps_its_epoch(
    store: Store, fake_clock: FakeClock
) -> None:
    submitted = await store.submit_task(new_task("wf", complete_within=7.0))

    claimed = await store.claim_tasks(locked_by="s1", limit=10)

    assert [t.id for t in claimed] == [submitted.task_id]
    task = claimed[0]
    assert task.process_state is ProcessState.PROCESSING
    assert (task.locked_by, task.lock_epoch) == ("s1", 1)
    assert task.complete_by is not None
    assert abs((task.complete_by - fake_clock.now()).total_seconds() - 7.0) < 1e-3
    stored = await store.get_task(task.id)
    assert stored is not None
    assert (stored.process_state, stored.locked_by, stored.lock_epoch) == (
        ProcessState.PROCESSING,
        "s1",
        1,
    )
    events = await store.task_events(task.id)
    assert events[-1].kind == "claimed"
    assert events[-1].detail == {"owner": "s1", "lock_epoch": 1}


async def test_an_owned_task_is_not_claimed_again(store: Store) -> None:
    await claimed_task(store, locked_by="s1")

    assert await store.claim_tasks(locked_by="s2", limit=10) == []
    assert await store.claim_tasks(locked_by="s1", limit=10) == []


async def test_claim_respects_the_limit(store: Store) -> None:
    for _ in range(5):
        await store.submit_task(new_task())

    first = await store.claim_tasks(locked_by="s1", limit=3)
    second = await store.claim_tasks(locked_by="s2", limit=3)

    assert (len(first), len(second)) == (3, 2)
    assert not {t.id for t in first} & {t.id for t in second}


async def test_concurrent_claims_from_many_connections_give_each_task_to_one_owner(
    stores: Stores,
) -> None:
    connections = [await stores.connect() for _ in range(3)]
    submitted = await asyncio.gather(*(connections[0].submit_task(new_task()) for _ in range(60)))
    ids = {s.task_id for s in submitted}

    async def claim_all(store: Store, owner: str) -> list[str]:
        got: list[str] = []
        while batch := await store.claim_tasks(locked_by=owner, limit=7):
            got += [t.id for t in batch]
        return got

    claims = await asyncio.gather(*(claim_all(connections[i % 3], f"s{i}") for i in range(6)))

    every = [task_id for got in claims for task_id in got]
    assert Counter(every).most_common(1)[0][1] == 1, "a task was claimed twice"
    assert set(every) == ids
    for owner, got in enumerate(claims):
        for task_id in got:
            task = await connections[0].get_task(task_id)
            assert task is not None
            assert (task.locked_by, task.lock_epoch) == (f"s{owner}", 1)


async def test_every_claim_bumps_the_epoch(store: Store, fake_clock: FakeClock) -> None:
    task = await claimed_task(store, locked_by="s1")
    assert task.lock_epoch == 1

    released = await store.release_tasks([task.id], locked_by="s1")
    assert released == 1
    after_release = await store.get_task(task.id)
    assert after_release is not None
    assert (after_release.process_state, after_release.locked_by, after_release.lock_epoch) == (
        ProcessState.PENDING,
        None,
        2,
    )

    (again,) = await store.claim_tasks(locked_by="s2", limit=10)
    assert (again.locked_by, again.lock_epoch) == ("s2", 3)

    reset = await supervisor_reset(store, fake_clock, again)
    assert (reset.locked_by, reset.lock_epoch) == (None, 4)
    (third,) = await store.claim_tasks(locked_by="s1", limit=10)
    assert third.lock_epoch == 5


async def test_release_gives_back_only_the_owners_tasks(store: Store) -> None:
    task = await claimed_task(store, locked_by="s1")

    assert await store.release_tasks([task.id], locked_by="s2") == 0
    stored = await store.get_task(task.id)
    assert stored is not None
    assert (stored.locked_by, stored.lock_epoch) == ("s1", 1)


async def test_claim_respects_not_before(store: Store, fake_clock: FakeClock) -> None:
    task = await claimed_task(store, locked_by="s1")
    reset = await supervisor_reset(store, fake_clock, task, not_before_in=10.0)
    assert reset.process_state is ProcessState.PENDING

    assert await store.claim_tasks(locked_by="s2", limit=10) == []
    fake_clock.advance(9.0)
    assert await store.claim_tasks(locked_by="s2", limit=10) == []
    fake_clock.advance(1.5)
    claimed = await store.claim_tasks(locked_by="s2", limit=10)

    assert [t.id for t in claimed] == [task.id]
    assert claimed[0].failure_count == 1


async def test_next_due_is_when_the_earliest_waiting_task_becomes_claimable(
    store: Store, fake_clock: FakeClock
) -> None:
    assert await store.next_due() is None
    task = await claimed_task(store, locked_by="s1")
    assert await store.next_due() is None  # claimed: nothing waits
    reset = await supervisor_reset(store, fake_clock, task, not_before_in=10.0)

    assert await store.next_due() == reset.not_before
    fake_clock.advance(11.0)
    await store.claim_tasks(locked_by="s2", limit=10)
    assert await store.next_due() is None


async def test_a_claimed_task_comes_with_its_recorded_steps(
    store: Store, fake_clock: FakeClock
) -> None:
    task = await claimed_task(store, locked_by="s1")
    await store.start_step(step_start(task, seq=1, agent="a", payload={"p": 1}))
    request = await taken_request(store, agent="a")
    assert await store.reply_and_ack(request, worker="w1", ok=True, body={"r": 1})
    assert [ok for _, ok in await store.record_replies(locked_by="s1", limit=10)] == [True]
    await store.release_tasks([task.id], locked_by="s1")

    (again,) = await store.claim_tasks(locked_by="s2", limit=10)

    assert [(s.seq, s.agent, str(s.state), s.request, s.result) for s in again.steps] == [
        (1, "a", "completed", {"p": 1}, {"r": 1})
    ]
