"""Retention's SQLite housekeeping: the purge's plan, a WAL that shrinks, checkpoints that never wait.

SQLite only. The WAL file is cut back to `journal_size_limit` once a
checkpoint has emptied it, and `checkpoint()` empties it when nobody holds it;
with a reader holding it, the checkpoint copies what it can and returns at
once, leaving the connection's busy timeout as it was.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path

import pytest

from shepherd.store.sqlite import JOURNAL_SIZE_LIMIT, SQLiteStore
from shepherd.store.sqlite import retention as sqlite_retention
from support.factories import new_task

#: A busy timeout so long that a checkpoint waiting on a reader hangs the test (see its timeout).
BUSY_TIMEOUT = 3600.0


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    opened = SQLiteStore(
        f"sqlite:///{tmp_path}/r.db", synchronous="NORMAL", store_timeout=BUSY_TIMEOUT
    )
    await opened.open()
    try:
        yield opened
    finally:
        await opened.close()


def _pragma(store: SQLiteStore, statement: str) -> int:
    """Run a PRAGMA on the store's own connection (idle between batches)."""
    conn = store._conn
    assert conn is not None
    return int(conn.execute(statement).fetchone()[0])


def _wal(store: SQLiteStore) -> int:
    return os.path.getsize(store.path + "-wal")


async def test_the_purge_reads_ended_tasks_through_their_own_index(store: SQLiteStore) -> None:
    conn = store._conn
    assert conn is not None
    plan = " ".join(
        str(row[3])
        for row in conn.execute("EXPLAIN QUERY PLAN " + sqlite_retention._ENDED, (0.0, 500))
    )

    assert "USING INDEX tasks_ended (updated_at<?)" in plan
    assert "TEMP B-TREE" not in plan  # no sort of every ended task


async def test_a_checkpoint_empties_the_wal_file(store: SQLiteStore) -> None:
    assert _pragma(store, "PRAGMA journal_size_limit") == JOURNAL_SIZE_LIMIT
    for n in range(50):
        await store.submit_task(new_task(data={"n": n, "pad": "x" * 2000}))
    assert _wal(store) > 0

    await store.checkpoint()

    assert _wal(store) == 0
    assert len(await store.list_tasks()) == 50


@pytest.mark.timeout(30)
async def test_a_checkpoint_never_waits_for_a_reader_and_keeps_the_busy_timeout(
    store: SQLiteStore,
) -> None:
    for n in range(20):
        await store.submit_task(new_task(data={"n": n, "pad": "x" * 2000}))
    with closing(sqlite3.connect(store.path, isolation_level=None)) as reader:
        reader.execute("BEGIN")
        assert reader.execute("SELECT count(*) FROM tasks").fetchone()[0] == 20
        await store.submit_task(new_task(data={"n": 20}))  # a frame the reader does not see

        await store.checkpoint()  # waiting for the reader would hang until the test's timeout

        assert _wal(store) > 0  # the reader holds the WAL: it could not be truncated
        assert _pragma(store, "PRAGMA busy_timeout") == BUSY_TIMEOUT * 1000
        reader.execute("COMMIT")
    await store.checkpoint()
    assert _wal(store) == 0
    assert (await store.submit_task(new_task(data={"n": 21}))).created
