"""The bench's event-log timeline waits for events another client's open transaction holds back.

On PostgreSQL `read_events` hands out an event only once no older transaction
is open anywhere on the server. `shepherd.bench.measure.timeline` reads on, up
to its patience, until the tasks it is told were processed have their events.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

from shepherd.bench.measure import timeline
from shepherd.store.contract import NewTask
from shepherd.store.postgres import PostgresStore

pytestmark = pytest.mark.postgres

#: Seconds a wait may take before the test fails (a backstop, not a timing claim).
PATIENCE = 30.0


class Reads:
    """The store, with an event set each time a read of the log comes back empty."""

    def __init__(self, store: PostgresStore) -> None:
        self.store = store
        self.came_back_empty = asyncio.Event()

    async def read_events(self, **kwargs: Any) -> Any:
        batch = await self.store.read_events(**kwargs)
        if not batch:
            self.came_back_empty.set()
        return batch


async def test_a_timeline_reads_on_until_the_processed_tasks_events_are_there(
    store: PostgresStore, postgres_url: str
) -> None:
    async with await psycopg.AsyncConnection.connect(postgres_url) as other:
        await other.execute("SELECT pg_current_xact_id()")  # open, and older than the events
        task_id = (await store.submit_task(NewTask(workflow="wf", input=None))).task_id
        (task,) = await store.claim_tasks(locked_by="s1", limit=1)
        await store.finish_task(task_id, locked_by="s1", epoch=task.lock_epoch, result=None)

        held_back = await timeline(store, [task_id])
        assert (held_back.received, held_back.processed) == ({}, {})

        reads = Reads(store)
        waiting = asyncio.create_task(
            timeline(reads, [task_id], complete=[task_id], patience=PATIENCE)  # type: ignore[arg-type]
        )
        await asyncio.wait_for(reads.came_back_empty.wait(), PATIENCE)
        assert not waiting.done()
        await other.rollback()

        line = await asyncio.wait_for(waiting, PATIENCE)

    assert set(line.received) == set(line.processed) == {task_id}
