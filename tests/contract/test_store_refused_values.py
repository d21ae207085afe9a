"""A value the store itself refuses is the caller's error, never "unavailable"; a store gone still is.

These go below the App's checks (`shepherd.core.limits`), straight to the
store's operation, to force what those checks exist to prevent: on PostgreSQL
a key whose index row is over the B-tree limit (54000, program limit
exceeded), on SQLite a value over the connection's length limit
(SQLITE_TOOBIG). Each must come back as a PayloadError, write nothing, and
leave the store working; a store that cannot be reached is still
StoreUnavailableError (the one error a caller should retry).
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from shepherd.errors import PayloadError, StoreUnavailableError
from shepherd.store.postgres import PostgresStore
from shepherd.store.sqlite import SQLiteStore
from support.factories import new_task

if TYPE_CHECKING:
    from shepherd.store.contract import Store
    from support.factories import Backend

#: Longer than SQLite's length limit as the test sets it, and than a PostgreSQL index row.
FORCED_BYTES = 4000
SQLITE_LENGTH_LIMIT = 2000


def incompressible(n_bytes: int, seed: int) -> str:
    """`n_bytes` of UTF-8 in random 4-byte characters: a value PostgreSQL cannot compress."""
    rng = random.Random(seed)
    return "".join(chr(rng.randrange(0x20000, 0x2A6D0)) for _ in range(n_bytes // 4))


async def lower_sqlite_length_limit(store: Store) -> None:
    """On SQLite, lower the writer connection's largest string (PostgreSQL has its own limit)."""
    if isinstance(store, SQLiteStore):
        limit = SQLITE_LENGTH_LIMIT

        def lower() -> None:
            assert store._conn is not None
            store._conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, limit)

        await store._call(lower)


@pytest.mark.parametrize("field", ["key", "reply_to"])
async def test_a_value_the_store_refuses_is_a_payload_error_and_writes_nothing(
    store: Store, field: str
) -> None:
    await lower_sqlite_length_limit(store)
    value = incompressible(FORCED_BYTES, seed=1)

    task = (
        new_task("wf", {"n": 1}, key=value)
        if field == "key"
        else new_task("wf", {"n": 1}, reply_to=value)
    )

    with pytest.raises(PayloadError) as refused:
        await store.submit_task(task)

    assert not isinstance(refused.value, StoreUnavailableError)
    assert "nothing was written" in refused.value.message
    assert await store.count_tasks() == {}
    submitted = await store.submit_task(new_task("wf", {"n": 2}, key="fine"))  # still working
    assert submitted.created
    assert sum((await store.count_tasks()).values()) == 1


async def test_in_a_batch_only_the_refused_submit_fails(store: Store) -> None:
    await lower_sqlite_length_limit(store)
    value = incompressible(FORCED_BYTES, seed=2)

    # Submitted together: one transaction, which the refused value breaks, then each alone.
    results = await asyncio.gather(
        store.submit_task(new_task("wf", 1, key="a")),
        store.submit_task(new_task("wf", 2, key=value)),
        store.submit_task(new_task("wf", 3, key="b")),
        return_exceptions=True,
    )

    assert [type(r).__name__ for r in results] == ["Submitted", "PayloadError", "Submitted"]
    assert sum((await store.count_tasks()).values()) == 2


async def test_a_store_that_cannot_be_reached_is_still_unavailable(
    backend: Backend, tmp_path: Path
) -> None:
    if backend.name == "postgres":
        # A closed port: nothing listens there, as when the server is stopped.
        gone: Store = PostgresStore("postgresql://shepherd@127.0.0.1:1/gone", connect_timeout=2)
    else:
        gone = SQLiteStore(f"sqlite:///{tmp_path}/no-such-dir/s.db")

    with pytest.raises(StoreUnavailableError):
        await gone.submit_task(new_task("wf", 1, key="k"))
    await gone.close()
