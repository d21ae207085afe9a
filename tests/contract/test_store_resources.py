"""Resources, partitions and assignments: the resolver's mapping, versioned, on every backend."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from shepherd.core.resources import Partition, Resolution, Resource
from shepherd.errors import (
    InvalidResourceError,
    ResourceExistsError,
    ResourceInUseError,
    UnknownPartitionError,
    UnknownResourceError,
)
from shepherd.store import signals as ch

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from shepherd.store.contract import Store
    from support.factories import Stores

DB1 = Resource(name="db1", kind="sqlite", info={"path": "one.db"}, capacity=3)
DB2 = Resource(name="db2", kind="sqlite", info={"path": "two.db"}, rate=10.0)


async def mapping(store: Store) -> tuple[list[Resource], list[Partition], int]:
    """Everything the resolver's mapping holds, and its version."""
    return (
        await store.list_resources(),
        await store.list_partitions(),
        await store.resolver_version(),
    )


async def two_resources_one_partition(store: Store) -> None:
    await store.add_resource(DB1)
    await store.add_resource(DB2)
    await store.move_partition("p1", "db1")
    await store.assign_entity("user-1", "p1")


async def test_a_new_store_has_an_empty_mapping_at_version_0(store: Store) -> None:
    assert await mapping(store) == ([], [], 0)
    assert await store.resolve("user-1") == (None, 0)


async def test_add_list_set_remove_a_resource(store: Store) -> None:
    assert await store.add_resource(DB2) == DB2
    assert await store.add_resource(DB1) == DB1
    assert await store.list_resources() == [DB1, DB2]

    changed = await store.set_resource("db1", capacity=None, rate=2.5, info={"path": "new.db"})

    assert changed == Resource(name="db1", kind="sqlite", info={"path": "new.db"}, rate=2.5)
    assert await store.list_resources() == [changed, DB2]
    assert await store.set_resource("db1", kind="postgres") == Resource(
        name="db1", kind="postgres", info={"path": "new.db"}, rate=2.5
    )
    assert await store.remove_resource("db2") == DB2
    assert [r.name for r in await store.list_resources()] == ["db1"]


async def test_partitions_and_entities_resolve_to_their_resource(store: Store) -> None:
    await two_resources_one_partition(store)
    await store.assign_entity("user-2", "p1")
    await store.move_partition("p2", "db2")

    found, version = await store.resolve("user-1")

    assert found == Resolution(entity="user-1", partition="p1", resource=DB1)
    assert version == await store.resolver_version()
    assert await store.list_partitions() == [
        Partition(name="p1", resource="db1", entities=2),
        Partition(name="p2", resource="db2", entities=0),
    ]
    assert await store.resolve("nobody") == (None, version)


async def test_moving_a_partition_moves_its_entities(store: Store) -> None:
    await two_resources_one_partition(store)

    moved, before = await store.move_partition("p1", "db2")

    assert (moved, before) == (Partition(name="p1", resource="db2", entities=1), "db1")
    found, _ = await store.resolve("user-1")
    assert found is not None
    assert found.resource == DB2


async def test_assigning_an_entity_again_moves_it_alone(store: Store) -> None:
    await two_resources_one_partition(store)
    await store.move_partition("p2", "db2")

    assert await store.assign_entity("user-1", "p2") == "p1"
    assert await store.unassign_entity("user-1") == "p2"
    assert await store.unassign_entity("user-1") is None
    assert (await store.resolve("user-1"))[0] is None


async def test_the_default_partition_resolves_unassigned_entities(store: Store) -> None:
    await two_resources_one_partition(store)
    await store.move_partition("shared", "db2")

    found, _ = await store.resolve("nobody", default_partition="shared")
    assigned, _ = await store.resolve("user-1", default_partition="shared")

    assert found == Resolution(entity="nobody", partition="shared", resource=DB2)
    assert assigned is not None
    assert assigned.partition == "p1"
    assert (await store.resolve("nobody", default_partition="missing"))[0] is None


# -- declare --------------------------------------------------------------------
async def test_declare_creates_a_missing_resource_once(store: Store) -> None:
    assert await store.declare_resource(DB1) is True
    version = await store.resolver_version()

    assert await store.declare_resource(DB1) is False
    assert await store.list_resources() == [DB1]
    assert await store.resolver_version() == version


async def test_declare_never_overwrites_an_operators_change(store: Store) -> None:
    await store.declare_resource(DB1)
    changed = await store.set_resource("db1", capacity=7, info={"path": "moved.db"})
    version = await store.resolver_version()

    assert await store.declare_resource(DB1) is False

    assert await store.list_resources() == [changed]
    assert await store.resolver_version() == version


async def test_concurrent_declarations_from_two_stores_create_one_row(stores: Stores) -> None:
    one, two = await stores.connect(), await stores.connect()

    created = await asyncio.gather(
        *(s.declare_resource(DB1) for s in (one, two, one, two)), return_exceptions=True
    )

    assert sorted(created, key=str) == [False, False, False, True]
    assert await one.list_resources() == [DB1]
    assert await two.resolver_version() == 1


# -- the version and the wake-up --------------------------------------------------
CHANGES: list[tuple[str, Callable[[Store], Awaitable[object]]]] = [
    ("add", lambda s: s.add_resource(Resource(name="db3", kind="http", info={}))),
    ("declare", lambda s: s.declare_resource(Resource(name="db3", kind="http", info={}))),
    ("set", lambda s: s.set_resource("db1", capacity=5)),
    ("remove", lambda s: s.remove_resource("db2")),
    ("move", lambda s: s.move_partition("p1", "db2")),
    ("new partition", lambda s: s.move_partition("p9", "db2")),
    ("assign", lambda s: s.assign_entity("user-9", "p1")),
    ("unassign", lambda s: s.unassign_entity("user-1")),
]


@pytest.mark.parametrize(("what", "change"), CHANGES, ids=[c[0] for c in CHANGES])
async def test_each_change_bumps_the_version_once_and_rings_resolver(
    store: Store, what: str, change: Callable[[Store], Awaitable[object]]
) -> None:
    await two_resources_one_partition(store)
    version = await store.resolver_version()
    wake = store.signals.event(ch.RESOLVER)

    await change(store)

    assert await store.resolver_version() == version + 1
    assert wake.is_set()
    assert (await store.resolve("anyone"))[1] == version + 1


NO_CHANGES: list[tuple[str, Callable[[Store], Awaitable[object]]]] = [
    ("declare existing", lambda s: s.declare_resource(DB1)),
    ("set to same", lambda s: s.set_resource("db1", capacity=3)),
    ("move to same", lambda s: s.move_partition("p1", "db1")),
    ("assign to same", lambda s: s.assign_entity("user-1", "p1")),
    ("unassign unassigned", lambda s: s.unassign_entity("nobody")),
]


@pytest.mark.parametrize(("what", "change"), NO_CHANGES, ids=[c[0] for c in NO_CHANGES])
async def test_a_write_that_changes_nothing_keeps_the_version_and_rings_nothing(
    store: Store, what: str, change: Callable[[Store], Awaitable[object]]
) -> None:
    await two_resources_one_partition(store)
    before = await mapping(store)
    wake = store.signals.event(ch.RESOLVER)

    await change(store)

    assert await mapping(store) == before
    assert not wake.is_set()


async def test_a_change_in_one_store_wakes_another(stores: Stores) -> None:
    one, two = await stores.connect(), await stores.connect()
    await two_resources_one_partition(one)
    wake = two.signals.event(ch.RESOLVER)

    await one.move_partition("p1", "db2")

    # Another process's wake-up comes through NOTIFY or a datagram: wait for it.
    async with asyncio.timeout(10):
        await wake.wait()
    assert await two.resolver_version() == await one.resolver_version()


# -- refused input changes nothing ------------------------------------------------
REFUSED: list[tuple[str, Callable[[Store], Awaitable[object]], type[Exception], str]] = [
    ("exists", lambda s: s.add_resource(DB1), ResourceExistsError, "'db1' exists"),
    (
        "capacity 0",
        lambda s: s.add_resource(Resource(name="x", kind="k", info={}, capacity=0)),
        InvalidResourceError,
        "resource 'x': capacity must be at least 1",
    ),
    (
        "capacity -1 on set",
        lambda s: s.set_resource("db1", capacity=-1),
        InvalidResourceError,
        "resource 'db1': capacity must be at least 1, not -1",
    ),
    (
        "rate 0",
        lambda s: s.set_resource("db1", rate=0.0),
        InvalidResourceError,
        "resource 'db1': rate must be above 0",
    ),
    (
        "rate nan",
        lambda s: s.set_resource("db1", rate=float("nan")),
        InvalidResourceError,
        "resource 'db1': rate must be above 0",
    ),
    (
        "bool capacity",
        lambda s: s.set_resource("db1", capacity=True),
        InvalidResourceError,
        "capacity must be a whole number",
    ),
    (
        "info not object",
        lambda s: s.set_resource("db1", info=[1]),  # type: ignore[arg-type]
        InvalidResourceError,
        "resource 'db1': info must be a JSON object",
    ),
    (
        "info not JSON",
        lambda s: s.add_resource(Resource(name="x", kind="k", info={"a": {1, 2}})),
        InvalidResourceError,
        "resource 'x': info is not JSON",
    ),
    (
        "info NaN",
        lambda s: s.set_resource("db1", info={"a": float("nan")}),
        InvalidResourceError,
        "NaN",
    ),
    (
        "empty kind",
        lambda s: s.set_resource("db1", kind=""),
        InvalidResourceError,
        "resource 'db1': kind '' must be non-empty",
    ),
    (
        "blank name",
        lambda s: s.add_resource(Resource(name=" x", kind="k", info={})),
        InvalidResourceError,
        "resource name ' x' must be non-empty",
    ),
    (
        "NUL entity",
        lambda s: s.assign_entity("a\x00b", "p1"),
        InvalidResourceError,
        "control character",
    ),
    (
        "surrogate entity",
        lambda s: s.assign_entity("a\udc00", "p1"),
        InvalidResourceError,
        "lone surrogate",
    ),
    (
        "long partition",
        lambda s: s.move_partition("p" * 801, "db1"),
        InvalidResourceError,
        "over its limit of 800 bytes",
    ),
    (
        "set unknown",
        lambda s: s.set_resource("nope", capacity=2),
        UnknownResourceError,
        "unknown resource 'nope'",
    ),
    (
        "remove unknown",
        lambda s: s.remove_resource("nope"),
        UnknownResourceError,
        "unknown resource 'nope'",
    ),
    (
        "remove in use",
        lambda s: s.remove_resource("db1"),
        ResourceInUseError,
        "resource 'db1' is in use by partition(s) 'p1'",
    ),
    (
        "move to unknown",
        lambda s: s.move_partition("p1", "nope"),
        UnknownResourceError,
        "unknown resource 'nope' (for partition 'p1')",
    ),
    (
        "assign to unknown",
        lambda s: s.assign_entity("user-1", "nope"),
        UnknownPartitionError,
        "unknown partition 'nope' (for entity 'user-1')",
    ),
    (
        "resolve bad entity",
        lambda s: s.resolve(""),
        InvalidResourceError,
        "entity name '' must be non-empty",
    ),
]


@pytest.mark.parametrize(
    ("what", "change", "error", "message"), REFUSED, ids=[r[0] for r in REFUSED]
)
async def test_refused_input_raises_a_clear_error_and_changes_nothing(
    store: Store,
    what: str,
    change: Callable[[Store], Awaitable[object]],
    error: type[Exception],
    message: str,
) -> None:
    await two_resources_one_partition(store)
    before = await mapping(store)
    wake = store.signals.event(ch.RESOLVER)

    with pytest.raises(error) as raised:
        await change(store)

    assert message in str(raised.value)
    assert await mapping(store) == before
    assert (await store.resolve("user-1"))[0] == Resolution(
        entity="user-1", partition="p1", resource=DB1
    )
    assert not wake.is_set()


async def test_a_refused_operation_does_not_spoil_others_in_its_batch(store: Store) -> None:
    await two_resources_one_partition(store)
    version = await store.resolver_version()

    outcomes = await asyncio.gather(
        store.add_resource(DB1),
        store.move_partition("p2", "db2"),
        store.assign_entity("user-1", "nope"),
        store.assign_entity("user-2", "p2"),
        return_exceptions=True,
    )

    assert isinstance(outcomes[0], ResourceExistsError)
    assert isinstance(outcomes[2], UnknownPartitionError)
    assert outcomes[1] == (Partition(name="p2", resource="db2", entities=0), None)
    assert outcomes[3] is None
    assert await store.resolver_version() == version + 2
    assert [(p.name, p.entities) for p in await store.list_partitions()] == [("p1", 1), ("p2", 1)]
