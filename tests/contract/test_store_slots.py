"""Capacity slots: leases on units of a resource's capacity, shared by every process."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from shepherd.core.resources import Resource, Slot
from shepherd.errors import UnknownResourceError
from shepherd.store import signals as ch
from support.factories import claimed_task, step_start, taken_request

if TYPE_CHECKING:
    from shepherd.core.records import Request, Task
    from shepherd.store.contract import Store
    from shepherd.testing import FakeClock
    from support.factories import Stores

DB = Resource(name="db", kind="sqlite", info={}, capacity=3)
OPEN = Resource(name="open", kind="http", info={})
LEASE = 10.0


async def take(store: Store, holder: str, *, worker: str = "w1", resource: str = "db") -> bool:
    granted, _ = await store.acquire_slots(resource, [holder], worker=worker, lease=LEASE)
    return granted == [holder]


async def test_at_most_capacity_holders_and_a_release_frees_one(store: Store) -> None:
    await store.add_resource(DB)

    assert await store.acquire_slots("db", ["h1"], worker="w1", lease=LEASE) == (["h1"], 3)
    assert [await take(store, h) for h in ("h2", "h3", "h4")] == [True, True, False]

    assert await store.release_slots([Slot("db", "h2")]) == 1
    assert await take(store, "h4")
    assert not await take(store, "h5")
    # Giving back a slot no longer held changes nothing.
    assert await store.release_slots([Slot("db", "h2")]) == 0
    assert not await take(store, "h5")


async def test_a_holder_taking_its_slot_again_holds_one_not_two(store: Store) -> None:
    await store.add_resource(DB)
    assert [await take(store, h) for h in ("h1", "h2", "h1", "h3")] == [True, True, True, True]
    assert not await take(store, "h4")


async def test_one_take_grants_as_many_holders_as_are_free_in_order(store: Store) -> None:
    await store.add_resource(DB)
    assert await take(store, "x")

    granted, capacity = await store.acquire_slots(
        "db", ["h1", "h2", "h3", "h4"], worker="w1", lease=LEASE
    )

    assert (granted, capacity) == (["h1", "h2"], 3)
    # A holder that holds its slot already keeps it, even with every slot taken.
    granted, _ = await store.acquire_slots("db", ["h3", "h2"], worker="w1", lease=LEASE)
    assert granted == ["h2"]


async def test_many_processes_taking_at_once_get_exactly_capacity_slots(stores: Stores) -> None:
    processes = [await stores.connect() for _ in range(4)]
    await processes[0].add_resource(DB)

    granted = await asyncio.gather(
        *(take(p, f"p{i}-{n}", worker=f"w{i}") for i, p in enumerate(processes) for n in range(10))
    )

    assert sum(granted) == 3


async def test_a_resource_without_capacity_grants_without_holding(store: Store) -> None:
    await store.add_resource(OPEN)
    holders = [f"h{n}" for n in range(5)]
    assert await store.acquire_slots("open", holders, worker="w1", lease=LEASE) == (holders, None)
    assert await store.renew_slots(worker="w1", lease=LEASE) == []


async def test_an_unknown_resource_is_refused_by_name(store: Store) -> None:
    with pytest.raises(UnknownResourceError, match="'nowhere'"):
        await take(store, "h1", resource="nowhere")


async def test_an_expired_slot_is_free_and_a_renewed_one_is_not(
    store: Store, fake_clock: FakeClock
) -> None:
    await store.add_resource(DB)
    await take(store, "a1", worker="w1")
    await take(store, "b1", worker="w2")
    await take(store, "b2", worker="w2")
    fake_clock.advance(LEASE * 0.6)

    assert await store.renew_slots(worker="w1", lease=LEASE) == [Slot("db", "a1")]
    fake_clock.advance(LEASE * 0.6)

    # w2's slots expired (never renewed): two are free, w1's renewed one is not.
    assert [await take(store, h, worker="w3") for h in ("c1", "c2", "c3")] == [True, True, False]
    # An expired slot is not renewed: its holder lost it.
    assert await store.renew_slots(worker="w2", lease=LEASE) == []


async def test_a_release_rings_the_slots_channel(store: Store) -> None:
    await store.add_resource(DB)
    await take(store, "h1")
    freed = store.signals.event(ch.SLOTS)

    await store.release_slots([Slot("db", "h1")])

    assert freed.is_set()


async def holding_the_only_slot(store: Store) -> tuple[Task, Request, Slot]:
    """A task's step request taken by w1, whose handling holds the one slot of `db`."""
    await store.add_resource(Resource(name="db", kind="sqlite", info={}, capacity=1))
    task = await claimed_task(store, locked_by="s1")
    await store.start_step(step_start(task, seq=1, agent="a"))
    request = await taken_request(store, agent="a")
    slot = Slot("db", "w1:1:1")
    assert await take(store, slot.holder)
    return task, request, slot


async def test_a_reply_gives_its_slot_back_in_the_same_transaction(store: Store) -> None:
    task, request, slot = await holding_the_only_slot(store)
    assert not await take(store, "other")
    freed = store.signals.event(ch.SLOTS)

    assert await store.reply_and_ack(request, worker="w1", ok=True, body={"done": 1}, slot=slot)

    assert freed.is_set()
    assert await take(store, "other")
    (reply,) = [
        r for r, recorded in await store.record_replies(locked_by="s1", limit=10) if recorded
    ]
    assert (reply.task_id, reply.body) == (task.id, {"done": 1})


async def test_a_reply_that_no_longer_counts_still_gives_its_slot_back(store: Store) -> None:
    _, request, slot = await holding_the_only_slot(store)

    # Another worker's reply to this request is refused; the slot is given back anyway.
    assert not await store.reply_and_ack(request, worker="w2", ok=True, body=None, slot=slot)

    assert await take(store, "other")
