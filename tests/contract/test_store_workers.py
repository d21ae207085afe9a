"""The worker registry: one row per process, beaten on the store's clock, dead after a ttl."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import TYPE_CHECKING

from shepherd.core.workers import Worker, WorkerState
from shepherd.store.contract import WORKER_RETENTION

if TYPE_CHECKING:
    from shepherd.store.contract import Store
    from shepherd.testing import FakeClock
    from support.factories import Stores

TTL = 10.0


async def register(
    store: Store, instance: str, *roles: str, agents: tuple[str, ...] = ()
) -> Worker:
    host, pid, _ = instance.split(":")
    return await store.register_worker(
        instance, host=host, pid=int(pid), roles=roles or ("scheduler",), agents=agents
    )


async def test_register_writes_the_row_on_the_store_clock(
    store: Store, fake_clock: FakeClock
) -> None:
    worker = await register(store, "web-1:42:ab", "scheduler", "agent", agents=("pay", "ship"))

    assert worker == Worker(
        instance="web-1:42:ab",
        host="web-1",
        pid=42,
        roles=("scheduler", "agent"),
        agents=("pay", "ship"),
        started_at=fake_clock.now(),
        beat_at=fake_clock.now(),
        stopped_at=None,
    )
    assert await store.list_workers() == [worker]


async def test_a_beat_moves_beat_at_to_now(store: Store, fake_clock: FakeClock) -> None:
    started = await register(store, "h:1:aa")
    fake_clock.advance(3)

    assert await store.beat_worker("h:1:aa") is True

    (worker,) = await store.list_workers()
    assert worker.beat_at == fake_clock.now()
    assert worker.started_at == started.started_at


async def test_a_beat_without_a_row_or_after_a_stop_changes_nothing(
    store: Store, fake_clock: FakeClock
) -> None:
    assert await store.beat_worker("h:1:gone") is False
    await register(store, "h:1:aa")
    fake_clock.advance(1)
    await store.stop_worker("h:1:aa")
    fake_clock.advance(1)

    assert await store.beat_worker("h:1:aa") is False

    (worker,) = await store.list_workers()
    assert worker.beat_at == fake_clock.now() - timedelta(seconds=2)
    assert worker.stopped_at == fake_clock.now() - timedelta(seconds=1)
    assert await store.list_workers() == [worker]  # no row was added for "h:1:gone"


async def test_stop_marks_the_row_once_and_registering_again_clears_it(
    store: Store, fake_clock: FakeClock
) -> None:
    await register(store, "h:1:aa")
    fake_clock.advance(1)
    await store.stop_worker("h:1:aa")
    stopped_at = fake_clock.now()
    fake_clock.advance(1)
    await store.stop_worker("h:1:aa")  # a stopped row stays stopped when it was
    await store.stop_worker("h:1:unknown")  # nothing to stop: no error, no row

    (worker,) = await store.list_workers()
    assert worker.stopped_at == stopped_at
    assert worker.state(now=fake_clock.now(), ttl=TTL) is WorkerState.STOPPED

    fake_clock.advance(1)
    again = await register(store, "h:1:aa", "agent", agents=("pay",))

    assert (again.stopped_at, again.started_at, again.beat_at) == (None, *[fake_clock.now()] * 2)
    assert (again.roles, again.agents) == (("agent",), ("pay",))
    assert await store.list_workers() == [again]
    assert await store.beat_worker("h:1:aa") is True


async def test_a_worker_is_dead_once_its_last_beat_is_ttl_old(
    store: Store, fake_clock: FakeClock
) -> None:
    await register(store, "h:1:aa")
    fake_clock.advance(TTL - 0.5)
    assert await store.dead_workers(["h:1:aa"], ttl=TTL) == set()

    fake_clock.advance(0.5)
    assert await store.dead_workers(["h:1:aa"], ttl=TTL) == {"h:1:aa"}
    (worker,) = await store.list_workers()
    assert worker.state(now=fake_clock.now(), ttl=TTL) is WorkerState.DEAD

    # A late beat brings it back: the registry speaks only of heartbeats.
    assert await store.beat_worker("h:1:aa") is True
    assert await store.dead_workers(["h:1:aa"], ttl=TTL) == set()


async def test_dead_workers_names_the_stopped_the_silent_and_the_unknown(
    store: Store, fake_clock: FakeClock
) -> None:
    for instance in ("h:1:live", "h:2:stopped", "h:3:silent"):
        await register(store, instance)
    fake_clock.advance(TTL / 2)
    await store.beat_worker("h:1:live")
    await store.stop_worker("h:2:stopped")
    fake_clock.advance(TTL / 2)

    asked = ["h:1:live", "h:2:stopped", "h:3:silent", "h:4:unknown", "h:1:live"]
    assert await store.dead_workers(asked, ttl=TTL) == {"h:2:stopped", "h:3:silent", "h:4:unknown"}
    assert await store.dead_workers([], ttl=TTL) == set()
    # The ttl is the caller's: a longer one keeps the silent one alive a while longer.
    assert await store.dead_workers(asked, ttl=TTL * 2) == {"h:2:stopped", "h:4:unknown"}


async def test_dead_workers_answers_for_many_instances(store: Store) -> None:
    live = [f"h:{pid}:aa" for pid in range(3)]
    for instance in live:
        await register(store, instance)
    unknown = [f"x:{n}:zz" for n in range(1200)]

    assert await store.dead_workers([*unknown, *live], ttl=TTL) == set(unknown)


async def test_list_workers_keeps_the_live_and_those_heard_from_since(
    store: Store, fake_clock: FakeClock
) -> None:
    await register(store, "h:1:old-stop")
    await register(store, "h:2:old-silent")
    fake_clock.advance(1)
    await store.stop_worker("h:1:old-stop")
    fake_clock.advance(3600)
    since = fake_clock.now()
    await register(store, "h:3:live")
    await register(store, "h:4:recent-stop")
    fake_clock.advance(1)
    await store.stop_worker("h:4:recent-stop")
    fake_clock.advance(TTL)
    await store.beat_worker("h:3:live")

    recent = await store.list_workers(since=since)
    everything = await store.list_workers()

    assert [w.instance for w in recent] == ["h:3:live", "h:4:recent-stop"]
    assert [w.instance for w in everything] == [
        "h:3:live",
        "h:4:recent-stop",
        "h:1:old-stop",
        "h:2:old-silent",
    ]
    states = {w.instance: w.state(now=fake_clock.now(), ttl=TTL) for w in everything}
    assert states == {
        "h:1:old-stop": WorkerState.STOPPED,
        "h:2:old-silent": WorkerState.DEAD,
        "h:3:live": WorkerState.ALIVE,
        "h:4:recent-stop": WorkerState.STOPPED,
    }


async def test_registering_forgets_rows_gone_for_longer_than_the_retention(
    store: Store, fake_clock: FakeClock
) -> None:
    await register(store, "h:1:stopped")
    await register(store, "h:2:silent")
    await register(store, "h:3:beating")
    await store.stop_worker("h:1:stopped")
    fake_clock.advance(WORKER_RETENTION - 60)
    await store.beat_worker("h:3:beating")
    await register(store, "h:4:new")
    assert len(await store.list_workers()) == 4  # a day has not passed yet

    fake_clock.advance(61)
    await register(store, "h:5:newer")

    assert [w.instance for w in await store.list_workers()] == [
        "h:5:newer",
        "h:4:new",
        "h:3:beating",
    ]


async def test_processes_see_each_others_rows(stores: Stores, fake_clock: FakeClock) -> None:
    one = await stores.connect()
    two = await stores.connect()
    # Several operations of one kind share a transaction (group commit).
    await asyncio.gather(*(register(one, f"a:{n}:aa") for n in range(5)))
    await register(two, "b:1:bb")
    fake_clock.advance(TTL)

    assert await asyncio.gather(*(one.beat_worker(f"a:{n}:aa") for n in range(5))) == [True] * 5
    assert await two.dead_workers(["a:0:aa", "b:1:bb"], ttl=TTL) == {"b:1:bb"}
    assert len(await two.list_workers()) == 6
