"""The read pool's size comes from Settings: `read_pool_min` open at start, `read_pool_max` at most.

The writer and the listener keep one connection each besides, whatever the pool.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import psycopg
import pytest

from shepherd import App
from shepherd.store.postgres import PostgresStore
from shepherd.testing import wait_until

#: The advisory lock the test holds while the store's reads queue for it.
LOCK = 4242


async def _backends(url: str, *, waiting: bool = False) -> int:
    """The store's connections to this test's database (those waiting on a lock, if `waiting`)."""
    query = (
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND application_name = 'shepherd'"
    )
    if waiting:
        query += " AND wait_event_type = 'Lock'"
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cursor = await conn.execute(query)
        row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


async def _backends_are(url: str, count: int, *, waiting: bool) -> bool:
    return await _backends(url, waiting=waiting) == count


@pytest.mark.postgres
async def test_the_pool_opens_read_pool_min_and_never_exceeds_read_pool_max(
    postgres_url: str,
) -> None:
    async with App(postgres_url, alerts=(), read_pool_min=3, read_pool_max=4) as app:
        store = app.store
        assert isinstance(store, PostgresStore)
        # The pool's minimum, plus the writer and the listener.
        assert await _backends(postgres_url) == 3 + 2
        async with await psycopg.AsyncConnection.connect(postgres_url, autocommit=True) as holder:
            await holder.execute("SELECT pg_advisory_lock(%s)", (LOCK,))
            reads = [
                asyncio.create_task(store.fetch("SELECT pg_advisory_xact_lock_shared(%s)", (LOCK,)))
                for _ in range(10)
            ]
            # Ten reads at once: four connections wait on the lock, the other reads
            # wait for a connection of the pool.
            await wait_until(
                lambda: store.statistics()["read_pool_size"] == 4,
                message=f"the pool did not grow to its maximum: {store.statistics()}",
            )
            await wait_until(
                lambda: _backends_are(postgres_url, 4, waiting=True),
                message="four reads did not wait on the lock",
            )
            assert await _backends(postgres_url) == 4 + 2
            await holder.execute("SELECT pg_advisory_unlock(%s)", (LOCK,))
            await asyncio.gather(*reads)
        stats = store.statistics()
        assert (stats["read_pool_min"], stats["read_pool_max"]) == (3, 4)
        assert stats["read_pool_size"] <= 4


@pytest.mark.postgres
async def test_the_environment_sets_the_pool(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SHEPHERD_READ_POOL_MIN", "1")
    monkeypatch.setenv("SHEPHERD_READ_POOL_MAX", "2")
    async with App(postgres_url, alerts=()) as app:
        assert await _backends(postgres_url) == 1 + 2
        stats = app.store.statistics()
        assert (stats["read_pool_min"], stats["read_pool_max"]) == (1, 2)


async def test_sqlite_ignores_the_read_pool(tmp_path: Path) -> None:
    async with App(
        f"sqlite:///{tmp_path}/s.db", alerts=(), read_pool_min=5, read_pool_max=5
    ) as app:
        assert await app.list_tasks() == []
