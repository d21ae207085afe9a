"""Processes sharing out the same keys at once never deadlock on them.

Each process's owner server takes the keys it wants in one batch. Two of them
asking for the same keys in different orders, at once, each held a key the
other waited for, until the server broke the deadlock by failing one batch
(retried). Every taker now locks the keys in one order.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import psycopg
import pytest

if TYPE_CHECKING:
    from support.postgres import OpenStore

pytestmark = pytest.mark.postgres

ROUNDS = 40
KEYS = 6


async def test_two_processes_taking_the_same_keys_in_opposite_orders_never_deadlock(
    postgres_url: str, open_store: OpenStore
) -> None:
    async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as conn:
        # Found in 10 ms rather than a second: the old code met one in nearly every round.
        dbname = conn.info.dbname
        await conn.execute(f"ALTER DATABASE \"{dbname}\" SET deadlock_timeout = '10ms'")
    first, second = await open_store(), await open_store()
    for n in range(ROUNDS):
        keys = [f"round-{n}-key-{k}" for k in range(KEYS)]
        got = await asyncio.gather(
            first.take_keys("events.write", keys, owner="p1", lease=0.001),
            second.take_keys("events.write", keys[::-1], owner="p2", lease=0.001),
        )
        assert sum(len(taken) for taken in got) >= KEYS
    assert (first._writer.retries, second._writer.retries) == (0, 0)
