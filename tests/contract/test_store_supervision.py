"""Supervision: leadership leases, and decisions fenced by leadership and by task epoch."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from shepherd.core.states import ProcessState
from shepherd.core.supervision import Compensate, Escalate, SupervisionPolicy, on_expired
from support.factories import (
    SUPERVISOR_LEASE,
    claimed_task,
    expire,
    leadership,
    new_task,
    step_start,
    supervisor_reset,
)

if TYPE_CHECKING:
    from shepherd.store.contract import Store
    from shepherd.testing import FakeClock
    from support.factories import Stores


async def test_a_second_holder_cannot_take_an_unexpired_lease(
    store: Store, fake_clock: FakeClock
) -> None:
    first = await store.acquire_lease(SUPERVISOR_LEASE, holder="a", ttl=5.0)
    assert first is not None
    assert first.holder == "a"

    assert await store.acquire_lease(SUPERVISOR_LEASE, holder="b", ttl=5.0) is None
    fake_clock.advance(4.0)
    assert await store.acquire_lease(SUPERVISOR_LEASE, holder="b", ttl=5.0) is None


async def test_the_holder_renews_its_lease_under_the_same_epoch(
    store: Store, fake_clock: FakeClock
) -> None:
    first = await leadership(store, holder="a", ttl=5.0)
    fake_clock.advance(4.0)
    renewed = await leadership(store, holder="a", ttl=5.0)
    fake_clock.advance(4.0)

    assert renewed.epoch == first.epoch
    assert renewed.expires_at > first.expires_at
    # Renewed at t=4 for 5 s: still held at t=8.
    assert await store.acquire_lease(SUPERVISOR_LEASE, holder="b", ttl=5.0) is None


async def test_an_expired_lease_passes_to_another_holder_with_a_new_epoch(
    store: Store, fake_clock: FakeClock
) -> None:
    old = await leadership(store, holder="a", ttl=5.0)
    fake_clock.advance(5.5)

    new = await store.acquire_lease(SUPERVISOR_LEASE, holder="b", ttl=5.0)

    assert new is not None
    assert new.holder == "b"
    assert new.epoch > old.epoch
    assert await store.acquire_lease(SUPERVISOR_LEASE, holder="a", ttl=5.0) is None


async def test_a_released_lease_is_free_at_once(store: Store) -> None:
    await leadership(store, holder="a", ttl=60.0)
    await store.release_lease(SUPERVISOR_LEASE, holder="a")

    assert await store.acquire_lease(SUPERVISOR_LEASE, holder="b", ttl=60.0) is not None


async def test_leases_are_exclusive_across_connections(stores: Stores) -> None:
    one, two = await stores.connect(), await stores.connect()

    held = await one.acquire_lease(SUPERVISOR_LEASE, holder="a", ttl=60.0)

    assert held is not None
    assert await two.acquire_lease(SUPERVISOR_LEASE, holder="b", ttl=60.0) is None


async def test_the_old_leaders_decisions_are_refused(store: Store, fake_clock: FakeClock) -> None:
    old = await leadership(store, holder="a", ttl=5.0)
    task = await claimed_task(store, locked_by="s1", complete_within=10.0)
    fake_clock.advance(10.5)
    assert await store.acquire_lease(SUPERVISOR_LEASE, holder="b", ttl=5.0) is not None
    (expired,) = await store.expired_claims(limit=10)
    decision = on_expired(expired, SupervisionPolicy(), now=store.now(), rng=random.Random(0))

    assert not await store.apply_supervision(expired, decision, leader=old)

    after = await store.get_task(task.id)
    assert after is not None
    assert (after.process_state, after.locked_by, after.lock_epoch, after.failure_count) == (
        ProcessState.PROCESSING,
        "s1",
        task.lock_epoch,
        0,
    )


async def test_a_leader_whose_lease_lapsed_is_refused_even_if_no_one_took_it(
    store: Store, fake_clock: FakeClock
) -> None:
    lease = await leadership(store, holder="a", ttl=5.0)
    task = await claimed_task(store, locked_by="s1", complete_within=1.0)
    fake_clock.advance(6.0)
    (expired,) = await store.expired_claims(limit=10)
    decision = on_expired(expired, SupervisionPolicy(), now=store.now(), rng=random.Random(0))

    assert not await store.apply_supervision(expired, decision, leader=lease)
    after = await store.get_task(task.id)
    assert after is not None
    assert after.locked_by == "s1"


async def test_a_decision_about_an_older_epoch_is_refused(
    store: Store, fake_clock: FakeClock
) -> None:
    task = await claimed_task(store, locked_by="s1", complete_within=1.0)
    expired = await expire(store, fake_clock, task)
    # Before the supervisor acts, the owner gives the task back and another claims it.
    await store.release_tasks([task.id], locked_by="s1")
    (current,) = await store.claim_tasks(locked_by="s2", limit=10)
    lease = await leadership(store)
    decision = on_expired(expired, SupervisionPolicy(), now=store.now(), rng=random.Random(0))

    assert not await store.apply_supervision(expired, decision, leader=lease)

    after = await store.get_task(task.id)
    assert after is not None
    assert (after.locked_by, after.lock_epoch, after.failure_count) == ("s2", current.lock_epoch, 0)


async def test_expired_claims_lists_only_owned_tasks_past_complete_by(
    store: Store, fake_clock: FakeClock
) -> None:
    short = await claimed_task(store, locked_by="s1", complete_within=1.0)
    await claimed_task(store, locked_by="s1", complete_within=60.0)
    await store.submit_task(new_task())

    fake_clock.advance(2.0)

    assert [t.id for t in await store.expired_claims(limit=10)] == [short.id]


async def test_escalate_moves_the_task_to_error_with_the_reason(
    store: Store, fake_clock: FakeClock
) -> None:
    task = await claimed_task(store, locked_by="s1", complete_within=1.0)
    await store.start_step(step_start(task, seq=1, agent="a", within=0.5))
    expired = await expire(store, fake_clock, task)
    decision = on_expired(
        expired, SupervisionPolicy(max_failures=1), now=store.now(), rng=random.Random(0)
    )
    assert isinstance(decision, Escalate)

    assert await store.apply_supervision(expired, decision, leader=await leadership(store))

    after = await store.get_task(task.id)
    assert after is not None
    assert (after.process_state, after.locked_by, after.failure_count) == (
        ProcessState.ERROR,
        None,
        1,
    )
    assert after.error == {"reason": decision.reason}
    assert await store.take_requests(agents=["a"], worker="w", limit=10) == []
    assert await store.claim_tasks(locked_by="s2", limit=10) == []


async def test_compensate_makes_the_task_claimable_as_compensating(
    store: Store, fake_clock: FakeClock
) -> None:
    task = await claimed_task(store, locked_by="s1", complete_within=1.0)
    expired = await expire(store, fake_clock, task)
    decision = on_expired(
        expired,
        SupervisionPolicy(max_failures=1, on_exhausted="compensate"),
        now=store.now(),
        rng=random.Random(0),
    )
    assert isinstance(decision, Compensate)

    assert await store.apply_supervision(expired, decision, leader=await leadership(store))

    (claimed,) = await store.claim_tasks(locked_by="s2", limit=10)
    assert claimed.process_state is ProcessState.COMPENSATING
    assert claimed.lock_epoch == task.lock_epoch + 2


async def test_a_reset_compensating_task_stays_compensating(
    store: Store, fake_clock: FakeClock
) -> None:
    task = await claimed_task(store, locked_by="s1", complete_within=1.0)
    await store.start_compensation(task.id, locked_by="s1", epoch=task.lock_epoch, error={"r": 1})

    reset = await supervisor_reset(store, fake_clock, task)

    assert (reset.process_state, reset.locked_by) == (ProcessState.COMPENSATING, None)
    (claimed,) = await store.claim_tasks(locked_by="s2", limit=10)
    assert claimed.process_state is ProcessState.COMPENSATING


async def test_start_compensation_gives_compensation_its_own_failure_budget(
    store: Store, fake_clock: FakeClock
) -> None:
    task = await claimed_task(store, locked_by="s1")
    await supervisor_reset(store, fake_clock, task)
    (again,) = await store.claim_tasks(locked_by="s1", limit=10)
    assert again.failure_count == 1

    await store.start_compensation(again.id, locked_by="s1", epoch=again.lock_epoch, error={"r": 1})

    after = await store.get_task(task.id)
    assert after is not None
    assert (after.process_state, after.locked_by, after.lock_epoch, after.failure_count) == (
        ProcessState.COMPENSATING,
        "s1",
        again.lock_epoch,
        0,
    )
