"""Crash attribution in the store: victims of a dead process, verdicts, suspect isolation."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING

from shepherd.core.states import ProcessState
from shepherd.core.supervision import CrashPolicy, on_crash
from support.factories import claimed_task, leadership, step_start, submitted_task

if TYPE_CHECKING:
    from shepherd.store.contract import Store
    from shepherd.testing import FakeClock

DEAD = "host:4242:dead"
POLICY = CrashPolicy(poison_crashes=3)


async def test_victims_are_the_tasks_a_dead_process_owned_or_ran(
    store: Store, fake_clock: FakeClock
) -> None:
    await store.register_worker(DEAD, host="host", pid=4242, roles=("scheduler",), agents=("a",))
    owned = await claimed_task(store, locked_by=f"{DEAD}/s")
    await store.start_step(step_start(owned, seq=1, agent="a"))
    ran = await claimed_task(store, locked_by="alive/s")
    await store.start_step(step_start(ran, seq=2, agent="a"))
    taken = await store.take_requests(agents=["a"], worker=f"{DEAD}/a", limit=1)
    assert [r.task_id for r in taken] == [owned.id]
    await store.take_requests(agents=["a"], worker="alive/a", limit=1)  # ran's: not the dead's
    (worker,) = await store.unreaped_workers()
    victims = {t.id: (o, r) for t, o, r in await store.crash_victims(DEAD, beat_at=worker.beat_at)}
    assert victims == {owned.id: (True, 1)}


async def test_a_crash_verdict_never_changes_the_failure_count(
    store: Store, fake_clock: FakeClock
) -> None:
    task = await claimed_task(store, locked_by=f"{DEAD}/s")
    await store.start_step(step_start(task, seq=1, agent="a"))
    task = replace(task, failure_count=0)
    lease = await leadership(store)
    verdict = on_crash(task, instance=DEAD, owned=True, running=1, policy=POLICY, now=store.now())
    assert verdict is not None
    assert await store.apply_crash(task, verdict, leader=lease)
    after = await store.get_task(task.id)
    assert after is not None
    assert (after.process_state, after.locked_by, after.failure_count) == (
        ProcessState.PENDING,
        None,
        0,
    )
    assert after.lock_epoch == task.lock_epoch + 1
    assert after.crashes == (f"{DEAD}#1",)
    assert after.owner_deaths == 1
    assert await store.take_requests(agents=["a"], worker="w", limit=10) == []
    # Fenced: the same verdict again (the old epoch) changes nothing.
    assert not await store.apply_crash(task, verdict, leader=lease)


async def test_an_agent_takes_at_most_the_suspects_it_is_allowed(store: Store) -> None:
    for n in range(3):
        await submitted_task(store, data={"n": n})
    tasks = await store.claim_tasks(locked_by="s", limit=10)
    for task in tasks[:2]:
        await store.start_step(replace(step_start(task, seq=1, agent="a"), suspect=True))
    await store.start_step(step_start(tasks[2], seq=1, agent="a"))

    first = await store.take_requests(agents=["a"], worker="w1", limit=10, suspects=1)
    assert sorted(r.suspect for r in first) == [False, True]
    second = await store.take_requests(agents=["a"], worker="w2", limit=10, suspects=0)
    assert second == []
    third = await store.take_requests(agents=["a"], worker="w3", limit=10, suspects=1)
    assert [r.suspect for r in third] == [True]


async def test_mark_died_and_reap(store: Store) -> None:
    await store.register_worker(DEAD, host="host", pid=4242, roles=(), agents=())
    assert await store.mark_died(DEAD)
    assert not await store.mark_died(DEAD)
    assert await store.dead_workers([DEAD], ttl=3600) == {DEAD}
    await store.reap_worker(DEAD)
    assert await store.unreaped_workers() == []
    # A process that beats again is alive again, and can be reaped again later.
    assert await store.beat_worker(DEAD)
    assert await store.dead_workers([DEAD], ttl=3600) == set()
    assert [w.instance for w in await store.unreaped_workers()] == [DEAD]


async def test_held_requests_say_who_holds_each_step_of_a_claim(store: Store) -> None:
    queued, taken, suspect = [await claimed_task(store, locked_by="s") for _ in range(3)]
    await store.start_step(step_start(taken, seq=1, agent="a"))
    (request,) = await store.take_requests(agents=["a"], worker="h:1:aa/a", limit=1)
    assert request.task_id == taken.id
    await store.start_step(step_start(queued, seq=2, agent="b"))
    await store.start_step(replace(step_start(suspect, seq=3, agent="b"), suspect=True))
    held = {
        r.task_id: (r.seq, r.lock_epoch, r.taken_by, r.suspect)
        for r in await store.held_requests([queued.id, taken.id, suspect.id, "unknown"])
    }
    assert held == {
        taken.id: (1, taken.lock_epoch, "h:1:aa/a", False),
        queued.id: (2, queued.lock_epoch, None, False),
        suspect.id: (3, suspect.lock_epoch, None, True),
    }
    assert await store.held_requests([]) == []


async def test_a_suspects_window_starts_when_it_is_taken(
    store: Store, fake_clock: FakeClock
) -> None:
    suspect, healthy = [await claimed_task(store, locked_by="s") for _ in range(2)]
    waits = replace(step_start(suspect, seq=1, agent="a", within=2.0), suspect=True)
    await store.start_step(replace(waits, queue_allowance=60.0))
    await store.start_step(step_start(healthy, seq=1, agent="a", within=60.0))
    queued = {r.task_id: r.complete_by for r in await store.held_requests([suspect.id, healthy.id])}
    fake_clock.advance(30.0)  # the suspect waits in line, inside its allowance

    taken = {
        r.task_id: r
        for r in await store.take_requests(agents=["a"], worker="w", limit=2, suspects=1)
    }
    # The suspect's window is `within` from the take, not what was left of its
    # allowance: it never stands taken with its probation's deadline behind it.
    assert taken[suspect.id].complete_by == store.now() + timedelta(seconds=2.0)
    assert taken[suspect.id].complete_by < queued[suspect.id]
    assert taken[healthy.id].complete_by == queued[healthy.id]  # a healthy step's is as queued
    held = {r.task_id: (r.taken_by, r.complete_by) for r in await store.held_requests([suspect.id])}
    assert held == {suspect.id: ("w", taken[suspect.id].complete_by)}
