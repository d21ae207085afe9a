"""Exclusive owners: a key's lease with an epoch, held by one owner at a time, fencing stale owners."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import TYPE_CHECKING

import pytest

from shepherd.errors import PayloadError

if TYPE_CHECKING:
    from shepherd.store.contract import Store
    from shepherd.testing import FakeClock
    from support.factories import Stores

AGENT = "events.write"
LEASE = 10.0


async def keys_of(store: Store, owner: str, keys: list[str], *, agent: str = AGENT) -> list[str]:
    """The keys granted to `owner` out of `keys`."""
    return [t.lease.key for t in await store.take_keys(agent, keys, owner=owner, lease=LEASE)]


async def test_a_free_key_is_taken_with_epoch_one_and_another_owner_is_refused(
    store: Store,
) -> None:
    (taken,) = await store.take_keys(AGENT, ["csv"], owner="p1", lease=LEASE)
    assert (taken.lease.key, taken.lease.owner, taken.lease.epoch, taken.state) == (
        "csv",
        "p1",
        1,
        None,
    )
    assert taken.lease.lease_until == store.now() + timedelta(seconds=LEASE)

    assert await keys_of(store, "p2", ["csv", "json"]) == ["json"]
    leases = await store.list_key_leases(AGENT)
    assert [(lease.key, lease.owner, lease.epoch) for lease in leases] == [
        ("csv", "p1", 1),
        ("json", "p2", 1),
    ]
    # Another agent's keys are its own.
    assert await keys_of(store, "p2", ["csv"], agent="other.agent") == ["csv"]


async def test_the_owner_renewing_keeps_its_epoch(store: Store, fake_clock: FakeClock) -> None:
    await store.take_keys(AGENT, ["csv"], owner="p1", lease=LEASE)
    fake_clock.advance(LEASE / 2)

    (again,) = await store.take_keys(AGENT, ["csv"], owner="p1", lease=LEASE)
    assert again.lease.epoch == 1
    (renewed,) = await store.renew_keys(owner="p1", lease=LEASE)
    assert (renewed.key, renewed.epoch) == ("csv", 1)


async def test_an_expired_lease_is_taken_over_with_the_epoch_bumped(
    store: Store, fake_clock: FakeClock
) -> None:
    await store.take_keys(AGENT, ["csv"], owner="p1", lease=LEASE)
    fake_clock.advance(LEASE * 0.6)
    assert [k.key for k in await store.renew_keys(owner="p1", lease=LEASE)] == ["csv"]
    fake_clock.advance(LEASE * 0.6)
    assert await keys_of(store, "p2", ["csv"]) == []  # renewed: still p1's

    fake_clock.advance(LEASE)  # p1 stopped renewing
    (taken,) = await store.take_keys(AGENT, ["csv"], owner="p2", lease=LEASE)
    assert (taken.lease.owner, taken.lease.epoch) == ("p2", 2)
    # The old owner's renewal no longer covers the key, and it cannot take it back.
    assert await store.renew_keys(owner="p1", lease=LEASE) == []
    assert await keys_of(store, "p1", ["csv"]) == []


async def test_the_same_owner_taking_back_an_expired_key_gets_a_new_epoch(
    store: Store, fake_clock: FakeClock
) -> None:
    await store.take_keys(AGENT, ["csv"], owner="p1", lease=LEASE)
    fake_clock.advance(LEASE * 2)
    (taken,) = await store.take_keys(AGENT, ["csv"], owner="p1", lease=LEASE)
    # Writes of its handling from before the gap carry epoch 1 and are refused.
    assert taken.lease.epoch == 2
    ok = await store.answer_owned(
        AGENT, "csv", owner="p1", epoch=1, answers=[], state={"offset": 1}
    )
    assert not ok


async def test_a_released_key_is_free_and_keeps_its_state(store: Store) -> None:
    await store.take_keys(AGENT, ["csv"], owner="p1", lease=LEASE)
    assert await store.answer_owned(
        AGENT, "csv", owner="p1", epoch=1, answers=[], state={"offset": 42}
    )

    assert await store.release_keys(AGENT, ["csv", "never"], owner="p2") == 0  # not p2's
    assert await store.release_keys(AGENT, ["csv", "never"], owner="p1") == 1
    assert await store.list_key_leases(AGENT) == []

    (taken,) = await store.take_keys(AGENT, ["csv"], owner="p2", lease=LEASE)
    assert (taken.lease.epoch, taken.state) == (2, {"offset": 42})


async def test_a_stale_owner_cannot_set_the_state(store: Store, fake_clock: FakeClock) -> None:
    await store.take_keys(AGENT, ["csv"], owner="p1", lease=LEASE)
    assert await store.answer_owned(
        AGENT, "csv", owner="p1", epoch=1, answers=[], state={"offset": 10}
    )
    fake_clock.advance(LEASE * 2)

    # Its lease ended: refused even before anyone else took the key.
    assert not await store.answer_owned(
        AGENT, "csv", owner="p1", epoch=1, answers=[], state={"n": 1}
    )
    (taken,) = await store.take_keys(AGENT, ["csv"], owner="p2", lease=LEASE)
    assert taken.state == {"offset": 10}
    assert not await store.answer_owned(
        AGENT, "csv", owner="p1", epoch=1, answers=[], state={"n": 2}
    )
    assert not await store.answer_owned(
        AGENT, "csv", owner="p1", epoch=2, answers=[], state={"n": 3}
    )
    assert await store.answer_owned(
        AGENT, "csv", owner="p2", epoch=2, answers=[], state={"offset": 11}
    )

    await store.release_keys(AGENT, ["csv"], owner="p2")
    (again,) = await store.take_keys(AGENT, ["csv"], owner="p3", lease=LEASE)
    assert again.state == {"offset": 11}


async def test_a_state_that_is_not_json_is_refused_and_changes_nothing(store: Store) -> None:
    await store.take_keys(AGENT, ["csv"], owner="p1", lease=LEASE)
    assert await store.answer_owned(
        AGENT, "csv", owner="p1", epoch=1, answers=[], state={"offset": 1}
    )
    with pytest.raises(PayloadError):
        await store.answer_owned(
            AGENT,
            "csv",
            owner="p1",
            epoch=1,
            answers=[],
            state={"bad": object()},
        )
    await store.release_keys(AGENT, ["csv"], owner="p1")
    (taken,) = await store.take_keys(AGENT, ["csv"], owner="p2", lease=LEASE)
    assert taken.state == {"offset": 1}


async def test_many_processes_taking_one_key_at_once_give_it_to_exactly_one(
    stores: Stores,
) -> None:
    processes = [await stores.connect() for _ in range(4)]

    granted = await asyncio.gather(
        *(keys_of(p, f"p{i}", ["csv", "json"]) for i, p in enumerate(processes))
    )

    assert sorted(k for keys in granted for k in keys) == ["csv", "json"]
    leases = await processes[0].list_key_leases(AGENT)
    assert {(lease.key, lease.epoch) for lease in leases} == {("csv", 1), ("json", 1)}
