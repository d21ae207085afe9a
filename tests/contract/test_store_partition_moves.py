"""A move that drains, in the store: `drain_partition` looks, marks, renews and moves; `end_partition_drain`.

One look reads the steps in flight on the partition's resource (running steps
of tasks that have not ended, recorded with a resolution to that partition on
that resource) and, in the same transaction, moves the partition if there are
none, else marks it as being moved under the holder's lease. The mark shows in
`resolve` (`draining_until`), bumps the version once (a renewal does not), and
keeps every other mover out until it ends or its lease passes.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from shepherd.core.moves import InFlightStep
from shepherd.core.resources import Partition, Resolution, Resource
from shepherd.errors import PartitionMovingError, UnknownPartitionError, UnknownResourceError
from support.factories import claimed_task, step_start, taken_request

if TYPE_CHECKING:
    from shepherd.core.records import Task
    from shepherd.store.contract import Store
    from shepherd.testing import FakeClock

DB1 = Resource(name="db1", kind="sqlite", info={"path": "one.db"})
DB2 = Resource(name="db2", kind="sqlite", info={"path": "two.db"})


async def mapped(store: Store) -> None:
    """db1 and db2; p1 on db1 holding user-1; p2 on db1, empty."""
    await store.add_resource(DB1)
    await store.add_resource(DB2)
    await store.move_partition("p1", "db1")
    await store.move_partition("p2", "db1")
    await store.assign_entity("user-1", "p1")


async def running_step(store: Store, partition: str = "p1", resource: Resource = DB1) -> Task:
    """A claimed task whose step 1 runs, sent for user-1 on `partition` on `resource`."""
    task = await claimed_task(store, locked_by="s1")
    where = Resolution(entity="user-1", partition=partition, resource=resource)
    await store.start_step(replace(step_start(task, seq=1, agent="a"), resolution=where))
    return task


async def test_a_partition_with_nothing_in_flight_moves_at_the_first_look(store: Store) -> None:
    await mapped(store)
    version = await store.resolver_version()
    # A step in flight elsewhere (another partition, or p1's name on another resource) is not p1's.
    await running_step(store, partition="p2")

    look = await store.drain_partition("p1", "db2", holder="m1")

    assert (look.moved, look.before, look.in_flight) == (True, "db1", ())
    assert look.partition == Partition(name="p1", resource="db2", entities=1)
    assert await store.resolver_version() == version + 1
    found, _ = await store.resolve("user-1")
    assert found is not None
    assert (found.resource, found.draining_until) == (DB2, None)


async def test_steps_in_flight_mark_the_partition_until_they_end(
    store: Store, fake_clock: FakeClock
) -> None:
    await mapped(store)
    task = await running_step(store)
    version = await store.resolver_version()
    step = InFlightStep(task_id=task.id, seq=1, agent="a", attempt=1)

    first = await store.drain_partition("p1", "db2", holder="m1", lease=15.0)

    assert (first.moved, first.before, first.in_flight) == (False, "db1", (step,))
    assert first.partition.resource == "db1"
    assert await store.resolver_version() == version + 1  # the mark is a change
    found, _ = await store.resolve("user-1")
    assert found is not None
    assert found.resource == DB1
    assert found.draining_until is not None
    assert found.draining_until > fake_clock.now()
    # Another mover, or a move at once, is refused naming the partition; nothing changes.
    for refused in (
        store.drain_partition("p1", "db2", holder="m2"),
        store.drain_partition("p1", "db1", holder="m2", force=True),
        store.move_partition("p1", "db2"),
    ):
        with pytest.raises(
            PartitionMovingError, match="partition 'p1' is being moved to resource 'db2'"
        ):
            await refused
    # A renewal moves the lease on, and no version.
    fake_clock.advance(5.0)
    again = await store.drain_partition("p1", "db2", holder="m1", lease=15.0)
    assert (again.moved, again.in_flight) == (False, (step,))
    assert await store.resolver_version() == version + 1
    renewed, _ = await store.resolve("user-1")
    assert renewed is not None
    assert renewed.draining_until is not None
    assert renewed.draining_until > found.draining_until

    # The step's reply is recorded: nothing is in flight, and the next look moves.
    request = await taken_request(store, agent="a")
    assert await store.reply_and_ack(request, worker="w1", ok=True, body={"done": 1})
    assert [ok for _, ok in await store.record_replies(locked_by="s1", limit=10)] == [True]
    moved = await store.drain_partition("p1", "db2", holder="m1")

    assert (moved.moved, moved.before, moved.in_flight) == (True, "db1", ())
    assert await store.resolver_version() == version + 2
    after, _ = await store.resolve("user-1")
    assert after is not None
    assert (after.resource, after.draining_until) == (DB2, None)


async def test_a_forced_look_moves_and_reports_what_was_in_flight(store: Store) -> None:
    await mapped(store)
    task = await running_step(store)

    look = await store.drain_partition("p1", "db2", holder="m1", create=False, force=True)

    assert (look.moved, look.before) == (True, "db1")
    assert look.in_flight == (InFlightStep(task_id=task.id, seq=1, agent="a", attempt=1),)
    assert (await store.list_partitions())[0] == Partition(name="p1", resource="db2", entities=1)


async def test_a_mark_ends_with_its_holder_or_its_lease(
    store: Store, fake_clock: FakeClock
) -> None:
    await mapped(store)
    await running_step(store)
    await store.drain_partition("p1", "db2", holder="m1", lease=15.0)
    version = await store.resolver_version()

    assert not await store.end_partition_drain("p1", "m2")  # not its mark: nothing changes
    assert await store.end_partition_drain("p1", "m1")
    assert not await store.end_partition_drain("p1", "m1")

    assert await store.resolver_version() == version + 1
    found, _ = await store.resolve("user-1")
    assert found is not None
    assert (found.resource, found.draining_until) == (DB1, None)
    # A lapsed lease keeps nobody out: another mover takes the partition over.
    await store.drain_partition("p1", "db2", holder="m1", lease=15.0)
    fake_clock.advance(16.0)
    look = await store.drain_partition("p1", "db2", holder="m2", force=True)
    assert (look.moved, look.partition.resource) == (True, "db2")


async def test_bad_moves_name_what_is_missing_and_change_nothing(store: Store) -> None:
    await mapped(store)
    version = await store.resolver_version()

    with pytest.raises(
        UnknownResourceError, match="unknown resource 'db9' \\(for partition 'p1'\\)"
    ):
        await store.drain_partition("p1", "db9", holder="m1")
    with pytest.raises(UnknownPartitionError, match="unknown partition 'p9'"):
        await store.drain_partition("p9", "db2", holder="m1", create=False)

    assert await store.resolver_version() == version
    # Without create=False, a new partition is created where it is put (nothing can be in flight).
    look = await store.drain_partition("p9", "db2", holder="m1")
    assert (look.moved, look.before, look.partition.resource) == (True, None, "db2")
