"""The PostgreSQL writer: one instant per batch, one transaction per Sync, clear refusals.

A batch of submits alone does not ask the database for the time: its statements
take the transaction's `now()` themselves. These tests check that such rows
carry exactly the instant a batch that does ask would have read, and that a
batch whose statements run up to one Sync is still all or nothing.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

import psycopg
import pytest

from shepherd.errors import ShepherdError, StoreUnavailableError
from shepherd.store.contract import NewTask
from shepherd.store.postgres import PostgresStore
from shepherd.store.postgres import tasks as pg_tasks
from support.postgres import OpenStore

pytestmark = pytest.mark.postgres


async def _rows(url: str, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cursor = await conn.execute(query, params)
        return await cursor.fetchall()


async def _instants(url: str, task_id: str) -> set[datetime]:
    """Every instant the submit of `task_id` stored: its columns and its `received` event."""
    (row,) = await _rows(
        url, "SELECT created_at, updated_at, not_before FROM tasks WHERE id = %s", (task_id,)
    )
    events = await _rows(
        url, "SELECT at FROM events WHERE task_id = %s AND kind = 'received'", (task_id,)
    )
    return {*row, *(at for (at,) in events)}


async def test_a_lone_submit_stores_its_transactions_instant_everywhere(
    open_store: OpenStore, postgres_url: str
) -> None:
    store = await open_store()  # the system clock: the database's now() decides
    assert store.database_clock

    submitted = await store.submit_task(NewTask(workflow="wf", input=1))

    (instant,) = await _instants(postgres_url, submitted.task_id)
    assert abs((instant - store.now()).total_seconds()) < 60


async def test_a_submit_in_sql_and_a_claim_reading_the_clock_share_the_batchs_instant(
    open_store: OpenStore, postgres_url: str
) -> None:
    store = await open_store()
    waiting = await store.submit_task(NewTask(workflow="wf", input="first"))
    before = store.statistics()

    # Started in one turn of the loop: one batch, whose claim reads the instant.
    new, (claimed,) = await asyncio.gather(
        store.submit_task(NewTask(workflow="wf", input="second")),
        store.claim_tasks(owner="s1", limit=1),
    )

    assert store.statistics()["batches"] - before["batches"] == 1
    assert claimed.id == waiting.task_id
    ((claimed_at,),) = await _rows(
        postgres_url,
        "SELECT at FROM events WHERE task_id = %s AND kind = 'claimed'",
        (claimed.id,),
    )
    assert await _instants(postgres_url, new.task_id) == {claimed_at}


async def test_a_statement_failing_late_in_a_batch_undoes_all_of_it_on_the_same_connection(
    store: PostgresStore, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    insert = pg_tasks._insert

    async def insert_then_fail(batch: Any, *args: Any) -> list[object]:
        outcomes = await insert(batch, *args)
        await batch.send("SELECT 1 / 0")  # refused by the server, after the insert ran
        return outcomes

    writer_pid = store._writer.pid
    monkeypatch.setattr(pg_tasks, "_insert", insert_then_fail)
    with pytest.raises(ShepherdError, match=r"refused a write \(22012\)"):
        await store.submit_task(NewTask(workflow="wf", input=1))
    monkeypatch.undo()

    assert await _rows(postgres_url, "SELECT id FROM tasks") == []
    assert await _rows(postgres_url, "SELECT id FROM events") == []
    submitted = await store.submit_task(NewTask(workflow="wf", input=2))
    assert submitted.created
    assert store._writer.pid == writer_pid  # rolled back, not reconnected


async def test_a_new_tasks_id_drawn_twice_is_refused_and_nothing_is_written(
    store: PostgresStore, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pg_tasks, "new_task_id", lambda: "0123456789abcdef0123")
    first = await store.submit_task(NewTask(workflow="wf", input=1))

    with pytest.raises(StoreUnavailableError, match="already taken; nothing was written"):
        await store.submit_task(NewTask(workflow="wf", input=2))

    assert await _rows(postgres_url, "SELECT id, input FROM tasks") == [(first.task_id, "1")]
