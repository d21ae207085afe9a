"""The App's resolver over a real store: declared resources, caching, invalidation, static resolution."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from typing import TYPE_CHECKING

import psycopg
import pytest

from shepherd import App, ConfigError
from shepherd.core.resources import Resolution, Resource
from shepherd.errors import InvalidResourceError, UnresolvedEntityError
from shepherd.governance.resolver import StaticResolver, StoreResolver
from shepherd.store.sqlite import path_from_url
from shepherd.testing import FakeClock, advance_until, wait_until
from support.backends import sqlite_only

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

DB1 = Resource(name="db1", kind="sqlite", info={"path": "one.db"}, capacity=3)
DB2 = Resource(name="db2", kind="sqlite", info={"path": "two.db"})


@pytest.fixture
async def other(store_url: str) -> AsyncIterator[App]:
    """A second App on the same store: another operator, or another process's view."""
    app = App(store_url, alerts=(), sqlite_synchronous="NORMAL")
    try:
        yield app
    finally:
        await app.close()


async def mapped(app: App) -> None:
    """db1 and db2; partition p1 on db1 holding user-1."""
    await app.open()
    await app.store.add_resource(DB1)
    await app.store.add_resource(DB2)
    await app.store.move_partition("p1", "db1")
    await app.store.assign_entity("user-1", "p1")


def bump_behind_its_back(url: str, *also: str) -> None:
    """Move the resolver's version with no wake-up at all (as a lost NOTIFY or datagram would).

    `also`: statements run first, in the same transaction (a change of the mapping).
    """
    statements = [*also, "UPDATE store_versions SET version = version + 1 WHERE name = 'resolver'"]
    if url.startswith("sqlite"):
        with closing(sqlite3.connect(path_from_url(url))) as conn, conn:
            for statement in statements:
                conn.execute(statement)
    else:
        with psycopg.connect(url) as pg:  # one transaction, committed on leaving
            for statement in statements:
                pg.execute(statement)


# -- declared resources ---------------------------------------------------------------
async def test_declared_resources_are_created_when_the_app_opens(app: App, other: App) -> None:
    declared = app.resource("orders-db", kind="sqlite", info={"path": "o.db"}, capacity=3)
    app.resource("api", kind="http", rate=2.5)

    await app.open()

    assert declared == Resource(name="orders-db", kind="sqlite", info={"path": "o.db"}, capacity=3)
    assert await other.store.list_resources() == [
        Resource(name="api", kind="http", info={}, rate=2.5),
        declared,
    ]


async def test_a_declaration_never_overwrites_an_operators_change(
    store_url: str, other: App
) -> None:
    first = App(store_url, alerts=())
    first.resource("orders-db", kind="sqlite", capacity=3)
    async with first:
        pass
    changed = await other.store.set_resource("orders-db", capacity=10, info={"path": "big.db"})
    version = await other.store.resolver_version()

    again = App(store_url, alerts=())  # a restart, still declaring capacity=3
    again.resource("orders-db", kind="sqlite", capacity=3)
    async with again:
        assert await again.store.list_resources() == [changed]
        assert await again.store.resolver_version() == version


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"capacity": 0}, "resource 'db': capacity must be at least 1, not 0"),
        ({"rate": -1.0}, "resource 'db': rate must be above 0"),
        ({"info": ["not", "an", "object"]}, "resource 'db': info must be a JSON object"),
        ({"info": {"bad": float("nan")}}, "resource 'db': info is not JSON"),
        ({"kind": ""}, "resource 'db': kind '' must be non-empty"),
    ],
)
def test_a_bad_declaration_raises_at_once(fields: dict[str, object], message: str) -> None:
    app = App("sqlite:///never-opened.db", alerts=())
    arguments: dict[str, object] = {"kind": "sqlite", **fields}

    with pytest.raises(InvalidResourceError, match="resource 'db'") as raised:
        app.resource("db", **arguments)  # type: ignore[arg-type]

    assert message in str(raised.value)
    assert isinstance(raised.value, ConfigError)
    assert app.resources == {}


def test_declaring_one_name_twice_differently_is_refused() -> None:
    app = App("sqlite:///never-opened.db", alerts=())
    app.resource("db", kind="sqlite", capacity=2)
    app.resource("db", kind="sqlite", capacity=2)  # the same again is fine

    with pytest.raises(InvalidResourceError, match="resource 'db': declared twice"):
        app.resource("db", kind="sqlite", capacity=3)


# -- the store resolver -------------------------------------------------------------
async def test_resolve_returns_the_entitys_partition_and_resource(app: App) -> None:
    await mapped(app)

    found = await app.resolver.resolve("user-1")

    assert found == Resolution(entity="user-1", partition="p1", resource=DB1)
    assert app.resolver.version == await app.store.resolver_version()


async def test_answers_are_cached_while_the_version_holds(app: App) -> None:
    await mapped(app)
    resolver = app.resolver
    assert isinstance(resolver, StoreResolver)
    await resolver.resolve("user-1")
    # Trusted once the watch has read the version this process knows of.
    await wait_until(lambda: resolver.statistics()["refreshes"] >= 1)
    before = resolver.statistics()

    for _ in range(3):
        assert (await resolver.resolve("user-1")).resource == DB1

    after = resolver.statistics()
    assert after["hits"] == before["hits"] + 3
    assert after["misses"] == before["misses"]


async def test_a_move_in_this_process_applies_to_the_next_resolve(app: App) -> None:
    await mapped(app)
    assert (await app.resolver.resolve("user-1")).resource == DB1

    await app.store.move_partition("p1", "db2")

    assert (await app.resolver.resolve("user-1")).resource == DB2


async def test_a_move_by_another_store_invalidates_this_cache(app: App, other: App) -> None:
    await mapped(app)
    resolver = app.resolver
    await resolver.resolve("user-1")
    await other.open()

    await other.store.move_partition("p1", "db2")
    moved = await other.store.resolver_version()

    await wait_until(lambda: resolver.version >= moved, message="the move was not seen")
    assert (await resolver.resolve("user-1")).resource == DB2


async def test_after_a_move_cached_entities_are_read_ahead(app: App, other: App) -> None:
    await mapped(app)
    resolver = app.resolver
    assert isinstance(resolver, StoreResolver)
    await resolver.resolve("user-1")
    await other.open()

    await other.store.move_partition("p1", "db2")

    moved = await other.store.resolver_version()
    await wait_until(
        lambda: resolver.version >= moved and resolver.statistics()["cached"] == 1,
        message="user-1 was not read again after the move",
    )
    misses = resolver.statistics()["misses"]
    assert (await resolver.resolve("user-1")).resource == DB2
    assert resolver.statistics()["misses"] == misses


async def test_the_version_is_read_again_every_resolver_refresh(store_url: str) -> None:
    clock = FakeClock()
    app = App(store_url, alerts=(), clock=clock, resolver_refresh=5.0)
    try:
        await mapped(app)
        resolver = app.resolver
        await resolver.resolve("user-1")
        await wait_until(lambda: resolver.version == 4)

        bump_behind_its_back(store_url)  # no wake-up reaches the resolver

        await advance_until(
            clock, lambda: resolver.version == 5, step=5.0, message="no periodic version read"
        )
        assert (await resolver.resolve("user-1")).resource == DB1
    finally:
        await app.close()


async def test_a_resolver_in_use_sees_a_move_without_a_wake_up_within_refresh_ahead(
    store_url: str,
) -> None:
    clock = FakeClock()
    app = App(store_url, alerts=(), clock=clock, resolver_refresh=60.0, resolver_refresh_ahead=5.0)
    try:
        await mapped(app)
        resolver = app.resolver
        assert isinstance(resolver, StoreResolver)
        assert (await resolver.resolve("user-1")).resource == DB1

        async def hit() -> bool:  # the wake-ups of the set-up's own writes have been read
            misses = resolver.statistics()["misses"]
            await resolver.resolve("user-1")
            return resolver.statistics()["misses"] == misses

        await wait_until(hit, message="user-1 is not cached")
        assert resolver.version == 4
        start = clock.monotonic()

        bump_behind_its_back(store_url, "UPDATE partitions SET resource = 'db2' WHERE name = 'p1'")
        assert (await resolver.resolve("user-1")).resource == DB1  # in use: cached until the timer

        await advance_until(
            clock, lambda: resolver.version == 5, step=1.0, message="no read ahead of time"
        )
        assert clock.monotonic() - start <= 5.0  # the timer's first tick, not resolver_refresh
        assert resolver.statistics()["ahead"] == 1
        # Refresh-ahead: user-1 is read again before anyone asks for it.
        await wait_until(lambda: resolver.statistics()["cached"] == 1, message="no refill")
        misses = resolver.statistics()["misses"]
        assert (await resolver.resolve("user-1")).resource == DB2
        assert resolver.statistics()["misses"] == misses

        # Idle from now on (after the resolve just made, one more early read): nothing
        # more is read until resolver_refresh has passed since that read.
        await advance_until(
            clock, lambda: resolver.statistics()["ahead"] == 2, step=1.0, message="no early read"
        )
        refreshes, since = resolver.statistics()["refreshes"], clock.monotonic()
        await advance_until(clock, lambda: clock.monotonic() - since >= 55.0, step=5.0)
        assert resolver.statistics()["refreshes"] == refreshes
        await advance_until(
            clock,
            lambda: resolver.statistics()["refreshes"] == refreshes + 1,
            step=1.0,
            message="no read at resolver_refresh",
        )
        assert resolver.statistics()["ahead"] == 2
    finally:
        await app.close()


async def test_an_unassigned_entity_is_an_error_naming_it(app: App) -> None:
    await mapped(app)

    with pytest.raises(UnresolvedEntityError, match="entity 'nobody' cannot be resolved") as e:
        await app.resolver.resolve("nobody")

    assert e.value.entity == "nobody"
    with pytest.raises(InvalidResourceError, match="entity name '' must be non-empty"):
        await app.resolver.resolve("")


async def test_the_default_partition_takes_unassigned_entities(store_url: str) -> None:
    app = App(store_url, alerts=(), default_partition="shared")
    try:
        await mapped(app)
        with pytest.raises(UnresolvedEntityError, match="default partition 'shared' does not"):
            await app.resolver.resolve("nobody")

        await app.store.move_partition("shared", "db2")

        found = await app.resolver.resolve("nobody")
        assert found == Resolution(entity="nobody", partition="shared", resource=DB2)
        assert (await app.resolver.resolve("user-1")).partition == "p1"
    finally:
        await app.close()


@sqlite_only()  # refused before the store is touched
async def test_a_resolver_serves_one_app_only(store_url: str) -> None:
    resolver = StoreResolver(default_partition="p1")
    App(store_url, alerts=(), resolver=resolver)

    with pytest.raises(ConfigError, match="belongs to another App"):
        App(store_url, alerts=(), resolver=resolver)
    with pytest.raises(ConfigError, match="default_partition"):
        StoreResolver(default_partition="")


# -- static resolution --------------------------------------------------------------
def by_number(entity: str) -> tuple[str, str]:
    """user-N lives in partition pN % 2, on db1 or db2: the seed's `userId % 4`."""
    n = int(entity.rsplit("-", 1)[1]) % 2
    return f"p{n}", f"db{n + 1}"


async def test_static_resolution_reads_the_resources_details_from_the_store(
    store_url: str, other: App
) -> None:
    app = App(store_url, alerts=(), resolver=StaticResolver(by_number))
    try:
        await mapped(other)

        assert await app.resolver.resolve("user-4") == Resolution(
            entity="user-4", partition="p0", resource=DB1
        )
        assert (await app.resolver.resolve("user-7")).resource == DB2

        changed = await other.store.set_resource("db1", capacity=9)
        version = await other.store.resolver_version()
        await wait_until(lambda: app.resolver.version >= version, message="the change was not seen")
        assert (await app.resolver.resolve("user-4")).resource == changed
    finally:
        await app.close()


async def test_static_resolution_to_a_missing_resource_names_it(store_url: str) -> None:
    app = App(store_url, alerts=(), resolver=StaticResolver(lambda e: ("p9", "db9")))
    bad = App(store_url, alerts=(), resolver=StaticResolver(lambda e: "db1"))  # type: ignore[arg-type,return-value]
    try:
        with pytest.raises(UnresolvedEntityError, match="resource 'db9', which does not exist"):
            await app.resolver.resolve("user-1")
        with pytest.raises(UnresolvedEntityError, match="not \\(partition, resource\\) names"):
            await bad.resolver.resolve("user-1")
    finally:
        await app.close()
        await bad.close()


@sqlite_only()  # the app keeps the resolver it was given; no store is read
async def test_any_resolver_may_be_given(store_url: str) -> None:
    class Fixed:
        version = 7

        async def resolve(self, entity: str) -> Resolution:
            return Resolution(entity=entity, partition="p", resource=DB1)

    fixed = Fixed()
    app = App(store_url, alerts=(), resolver=fixed)

    assert app.resolver is fixed
    assert (await app.resolver.resolve("x")).resource == DB1
