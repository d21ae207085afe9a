"""A durable call's resolution (`app.call(..., entity=)`): kept with the call, given to each handling.

Every handling of a call, in any process, must see the resolution the caller
made (its resource is the one whose slot and tokens the handling takes), so it
must read back from the call's row exactly as written: alone or sent in one
group commit (PostgreSQL's array insert), taken by any worker or by a key's
owner, and on a later handling.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from shepherd.core.resources import Resolution, Resource

if TYPE_CHECKING:
    from shepherd.store.contract import Store
    from shepherd.testing import FakeClock

AGENT = "orders.write"
WITHIN = 5.0
DB_1 = Resource(
    name="db-1", kind="sqlite", info={"path": "/data/1.db", "tags": ["eu", "ü"]}, capacity=2
)
DB_2 = Resource(name="db-2", kind="http", info={}, rate=10.5)


def where(entity: str, resource: Resource) -> Resolution:
    return Resolution(entity=entity, partition=f"p-{entity}", resource=resource)


async def send(
    store: Store, call_id: str, resolution: Resolution | None, *, key: str | None = None
) -> None:
    await store.send_call(
        call_id,
        AGENT,
        {"id": call_id},
        within=WITHIN,
        max_attempts=3,
        expires_in=60.0,
        owner_key=key,
        resolution=resolution,
    )


async def test_each_calls_resolution_reads_back_as_written_sent_alone_or_together(
    store: Store, fake_clock: FakeClock
) -> None:
    await send(store, "alone", where("u-0", DB_1))
    # Sent at once, they go in one group commit (one statement over arrays on PostgreSQL).
    await asyncio.gather(
        send(store, "c1", where("u-1", DB_1)),
        send(store, "c2", None),
        send(store, "c3", where("u-3", DB_2)),
    )

    taken, _ = await store.take_calls(worker="w1", agents=[AGENT], limit=10)
    assert {c.call_id: c.resolution for c in taken} == {
        "alone": where("u-0", DB_1),
        "c1": where("u-1", DB_1),
        "c2": None,
        "c3": where("u-3", DB_2),
    }
    # A later handling (the first overran) sees the same resolution.
    fake_clock.advance(WITHIN + 0.1)
    again, _ = await store.take_calls(worker="w2", agents=[AGENT], limit=10)
    assert {c.call_id: (c.attempt, c.resolution) for c in again}["c3"] == (2, where("u-3", DB_2))


async def test_a_keys_owner_takes_its_calls_with_their_resolutions(store: Store) -> None:
    await send(store, "k1", where("u-1", DB_2), key="u-1")
    await send(store, "k2", None, key="u-1")
    (lease,) = await store.take_keys(AGENT, ["u-1"], owner="o1", lease=10.0)

    taken, _ = await store.take_key_calls(
        AGENT, "u-1", owner="o1", epoch=lease.lease.epoch, limit=10
    )

    assert [(c.call_id, c.resolution) for c in taken] == [("k1", where("u-1", DB_2)), ("k2", None)]
