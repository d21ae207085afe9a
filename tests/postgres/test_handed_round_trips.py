"""Steps handed to their key's owner as they start cost no round trip: the server decides in
the INSERT whether the owner's worker takes the request, and it is read back with the commit.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING

import pytest

from shepherd.core.records import Request
from shepherd.store.ops import OwnerTake
from support.factories import new_task, step_start

if TYPE_CHECKING:
    from shepherd.core.records import Task
    from shepherd.store.contract import StepStart
    from shepherd.store.postgres import PostgresStore
    from support.postgres import OpenStore

pytestmark = pytest.mark.postgres

AGENT = "ledger"


def _keyed(task: Task, key: str) -> StepStart:
    start = step_start(task, agent=AGENT, payload={"user": key})
    return replace(start, owner_key=key)


async def test_handed_starts_of_a_key_owned_and_not_wait_once_before_their_commit(
    open_store: OpenStore,
) -> None:
    pg: PostgresStore = await open_store()
    assert pg.database_clock
    for i in range(2):
        await pg.submit_task(new_task(data=i))
    mine, theirs = await pg.claim_tasks(locked_by="s1", limit=2)
    (owned,) = await pg.take_keys(AGENT, ["u1"], owner="p1", lease=10.0)
    fence = OwnerTake(worker="p1/a", owner="p1", epoch=owned.lease.epoch)
    before = pg.statistics()

    taken, queued = await asyncio.gather(
        pg.start_step_owned(_keyed(mine, "u1"), take=fence),
        pg.start_step_owned(_keyed(theirs, "u2"), take=fence),
    )

    after = pg.statistics()
    assert after["batches"] - before["batches"] == 1, "the starts did not share one batch"
    assert after["round_trips"] - before["round_trips"] == 1
    assert isinstance(taken, Request)  # u1 is p1's
    assert isinstance(queued, datetime)  # u2 is nobody's: queued for its owner to be
