"""The cost of a bare commit on the bench's store: one trivial write transaction, timed.

What a lone submit is measured against: the least a durable write costs on the
same store in the same run. On SQLite, `BEGIN IMMEDIATE`, an `UPDATE` of one
row and `COMMIT` on a connection of its own, at the bench's `synchronous`
(FULL: the commit waits for the fsync); on PostgreSQL, one `UPDATE` of one row
in autocommit (one round trip; the commit waits for the WAL flush, as the
server's settings say). The row sits in a table of its own, made for the
measure and dropped after it; nothing else uses the store meanwhile.
"""

from __future__ import annotations

import sqlite3
import time

from shepherd.bench.measure import Spread
from shepherd.bench.pgstat import is_postgres

TABLE = "shepherd_bench_bare_commit"
_CREATE = f"CREATE TABLE IF NOT EXISTS {TABLE} (id INTEGER PRIMARY KEY, n BIGINT NOT NULL)"
_ROW = f"INSERT INTO {TABLE} (id, n) VALUES (1, 0) ON CONFLICT (id) DO NOTHING"
_UPDATE = f"UPDATE {TABLE} SET n = n + 1 WHERE id = 1"
_DROP = f"DROP TABLE IF EXISTS {TABLE}"


async def bare_commits(store: str, n: int, *, synchronous: str = "FULL") -> Spread:
    """Time `n` bare write commits on `store`, one after the other."""
    if is_postgres(store):
        return await _postgres(store, n)
    # `sqlite:///relative.db` or `sqlite:////abs/path.db`, as the store reads it.
    return _sqlite(store.removeprefix("sqlite://").removeprefix("/"), n, synchronous)


def _sqlite(path: str, n: int, synchronous: str) -> Spread:
    conn = sqlite3.connect(path, isolation_level=None, timeout=30.0)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {'NORMAL' if synchronous == 'NORMAL' else 'FULL'}")
        conn.execute(_CREATE)
        conn.execute(_ROW)
        took = []
        for _ in range(n):
            began = time.perf_counter()
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(_UPDATE)
            conn.execute("COMMIT")
            took.append(time.perf_counter() - began)
        conn.execute(_DROP)
    finally:
        conn.close()
    return Spread.of(took)


async def _postgres(url: str, n: int) -> Spread:
    # Imported here: a SQLite-only install has no psycopg (see `pgstat`).
    import psycopg

    conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
    try:
        await conn.execute(_CREATE)
        await conn.execute(_ROW)
        took = []
        for _ in range(n):
            began = time.perf_counter()
            await conn.execute(_UPDATE)
            took.append(time.perf_counter() - began)
        await conn.execute(_DROP)
    finally:
        await conn.close()
    return Spread.of(took)


__all__ = ["TABLE", "bare_commits"]
