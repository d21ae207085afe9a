"""Retention on PostgreSQL: what the conformance suite cannot show, a submit racing a purge and the plans."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from shepherd.store.contract import NewTask
from shepherd.store.postgres import PostgresStore
from shepherd.store.postgres.retention import _PURGE
from shepherd.testing import wait_until

pytestmark = pytest.mark.postgres


async def _processed(store: PostgresStore, key: str) -> str:
    task_id = (await store.submit_task(NewTask(workflow="wf", input=None, key=key))).task_id
    (task,) = await store.claim_tasks(locked_by="s1", limit=1)
    await store.finish_task(task_id, locked_by="s1", epoch=task.lock_epoch, result=None)
    return task_id


async def _waiting_on_a_lock(url: str) -> bool:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cursor = await conn.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        row = await cursor.fetchone()
        return row is not None and row[0] > 0


async def test_a_submit_that_waited_on_a_purge_of_its_key_returns_the_purged_task(
    store: PostgresStore, postgres_url: str
) -> None:
    purged = await _processed(store, "order-7")
    async with await psycopg.AsyncConnection.connect(postgres_url) as purger:
        # A purge in flight: the task deleted and its tombstone written, not yet committed.
        await purger.execute("DELETE FROM tasks WHERE id = %s", (purged,))
        await purger.execute(
            "INSERT INTO tombstones (task_id, workflow, key, process_state, ended_at, "
            "purged_at) VALUES (%s, 'wf', 'order-7', 'processed', now(), now())",
            (purged,),
        )
        submit = asyncio.create_task(
            store.submit_task(NewTask(workflow="wf", input={"again": 1}, key="order-7"))
        )
        # The submit's insert meets the deleted row's key and waits for the purge.
        await wait_until(
            lambda: _waiting_on_a_lock(postgres_url), timeout=10, message="the submit never waited"
        )
        await purger.commit()
        submitted = await submit

    assert (submitted.task_id, submitted.created) == (purged, False)
    assert await store.list_tasks() == []


async def test_the_purge_finds_its_rows_through_indexes(postgres_url: str) -> None:
    store = PostgresStore(postgres_url, min_connections=1, max_connections=1)
    await store.open()
    await store.close()
    async with await psycopg.AsyncConnection.connect(postgres_url) as conn:
        await conn.execute("SET enable_seqscan = off")
        now = datetime.now(UTC)
        cursor = await conn.execute("EXPLAIN " + _PURGE.replace("%b", "%s"), (now, 500, now))
        plan = "\n".join(str(row[0]) for row in await cursor.fetchall())

    assert "tasks_ended" in plan  # the partial index of ended tasks, by updated_at
    assert "done_keys_bytes" in plan  # a task's done keys, as a byte-order range
    for table in ("tasks", "steps", "events", "done_keys"):
        assert f"Seq Scan on {table}" not in plan, plan


async def test_a_transactional_submit_of_a_purged_key_returns_the_purged_task(
    store: PostgresStore, postgres_url: str
) -> None:
    purged = await _processed(store, "order-8")
    assert await store.purge_tasks(ended_before=store.now() + timedelta(seconds=1), limit=5) == 1

    async with await psycopg.AsyncConnection.connect(postgres_url) as conn:
        submitted = await store.submit_task_in(
            NewTask(workflow="wf", input=None, key="order-8"), conn
        )
        await conn.commit()

    assert (submitted.task_id, submitted.created) == (purged, False)
    assert await store.list_tasks() == []
