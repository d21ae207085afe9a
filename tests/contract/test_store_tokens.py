"""A resource's rate: one token bucket in the store, shared by every process."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from shepherd.core.resources import Resource
from shepherd.errors import UnknownResourceError

if TYPE_CHECKING:
    from shepherd.store.contract import Store
    from shepherd.testing import FakeClock
    from support.factories import Stores

API = Resource(name="api", kind="http", info={}, rate=10.0)
OPEN = Resource(name="open", kind="http", info={})


async def test_a_bucket_grants_a_seconds_worth_then_refills_at_the_rate(
    store: Store, fake_clock: FakeClock
) -> None:
    await store.add_resource(API)

    assert await store.take_tokens("api", want=4) == (4, 10.0, 0.0)
    granted, rate, wait = await store.take_tokens("api", want=10)
    assert (granted, rate) == (6, 10.0)
    assert wait == pytest.approx(0.1)
    assert (await store.take_tokens("api", want=1))[0] == 0

    fake_clock.advance(0.35)
    assert (await store.take_tokens("api", want=10))[0] == 3
    fake_clock.advance(60)
    assert (await store.take_tokens("api", want=50))[0] == 10  # never more than a second's worth


async def test_many_processes_share_one_bucket(stores: Stores) -> None:
    processes = [await stores.connect() for _ in range(4)]
    await processes[0].add_resource(API)

    outcomes = await asyncio.gather(
        *(p.take_tokens("api", want=1) for p in processes for _ in range(10))
    )

    assert sum(granted for granted, _, _ in outcomes) == 10


async def test_a_resource_without_a_rate_grants_everything(store: Store) -> None:
    await store.add_resource(OPEN)
    assert await store.take_tokens("open", want=1000) == (1000, None, 0.0)


async def test_a_rate_set_later_applies_at_once(store: Store) -> None:
    await store.add_resource(OPEN)
    await store.set_resource("open", rate=2.0)
    assert (await store.take_tokens("open", want=5))[:2] == (2, 2.0)


async def test_an_unknown_resource_is_refused_by_name(store: Store) -> None:
    with pytest.raises(UnknownResourceError, match="'nowhere'"):
        await store.take_tokens("nowhere", want=1)
