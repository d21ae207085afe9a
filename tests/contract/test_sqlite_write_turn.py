"""The writers' turn on SQLite: a flock beside the file, lone writes on the loop, a foreign writer.

Another process holding the turn is a real subprocess that takes the lock file
and is SIGKILLed; a writer that is not shepherd's is a plain `sqlite3`
connection holding the database's write lock.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pytest

from shepherd.errors import StoreUnavailableError
from shepherd.store.sqlite import SQLiteStore
from shepherd.store.sqlite.write_lock import WriteLock, lock_path
from support.factories import new_task

#: Seconds to wait for what must happen (a backstop, not a timing claim).
PATIENCE = 30.0
#: How long a write that must wait is watched not to finish.
WATCH = 0.3

_HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_CREAT, 0o666)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()
"""


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    made = SQLiteStore(f"sqlite:///{tmp_path}/turn.db", synchronous="NORMAL")
    await made.open()
    yield made
    await made.close()


@contextmanager
def turn_held(db: str) -> Iterator[subprocess.Popen[str]]:
    """A process that takes the writers' turn of `db` and keeps it until it is killed."""
    with subprocess.Popen(
        [sys.executable, "-c", _HOLDER, lock_path(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        try:
            assert holder.stdout is not None
            assert holder.stdout.readline().strip() == "held"
            yield holder
        finally:
            holder.kill()
            holder.wait(timeout=PATIENCE)


async def test_a_lone_write_commits_on_the_loop(store: SQLiteStore) -> None:
    await store.submit_task(new_task())

    stats = store.statistics()
    assert stats["lone_writes"] == 1
    assert stats["commits"] == 1
    assert Path(lock_path(store.path)).is_file()  # noqa: ASYNC240 - one stat in a test


async def test_a_write_waits_for_a_process_holding_the_turn_and_goes_on_once_it_is_killed(
    store: SQLiteStore,
) -> None:
    with turn_held(store.path) as holder:
        submitted = asyncio.ensure_future(store.submit_task(new_task()))
        done, _ = await asyncio.wait({submitted}, timeout=WATCH)
        assert not done  # it waits for the turn, it does not fail
        os.kill(holder.pid, signal.SIGKILL)  # the kernel lets go of a dead process's lock
        created = await asyncio.wait_for(submitted, PATIENCE)

    assert created.created
    assert store.statistics()["lone_writes"] == 0  # refused the turn, it went to the thread
    assert await store.get_task(created.task_id) is not None


async def test_a_foreign_writer_holding_the_lock_never_blocks_the_loop(
    store: SQLiteStore,
) -> None:
    foreign = sqlite3.connect(store.path, isolation_level=None)
    try:
        foreign.execute("BEGIN IMMEDIATE")
        submitted = asyncio.ensure_future(store.submit_task(new_task()))
        ticks = 0
        while ticks < 3:  # the loop goes on while the write waits in the busy handler
            await asyncio.sleep(0.01)
            ticks += 1
        assert not submitted.done()
        foreign.execute("COMMIT")
        created = await asyncio.wait_for(submitted, PATIENCE)
    finally:
        foreign.close()

    assert created.created
    assert store.statistics()["lone_writes"] == 0
    # The busy timeout is the store's again for what the thread runs.
    conn = store._conn
    assert conn is not None
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == int(store.store_timeout * 1000)


async def test_writes_made_while_another_process_has_the_turn_commit_together(
    store: SQLiteStore,
) -> None:
    with turn_held(store.path) as holder:
        first = asyncio.ensure_future(store.submit_task(new_task()))
        await asyncio.wait({first}, timeout=WATCH)
        later = [asyncio.ensure_future(store.submit_task(new_task())) for _ in range(5)]
        await asyncio.wait(later, timeout=WATCH)
        os.kill(holder.pid, signal.SIGKILL)
        await asyncio.wait_for(asyncio.gather(first, *later), PATIENCE)

    # The thread took its batch once it had the turn: all six in one transaction.
    assert store.statistics()["commits"] == 1


def test_without_a_lock_file_the_turn_is_always_free(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = str(tmp_path / "x.db")
    os.mkdir(lock_path(db))  # where the lock file should be, a folder: it cannot be opened
    turn = WriteLock(db)
    turn.open()

    assert turn.acquire(wait=False)
    assert WriteLock(db).acquire(wait=False)  # nobody else is kept out either
    turn.release()
    turn.close()
    assert "no write lock file" in caplog.text


async def test_a_wait_for_the_turn_past_store_timeout_fails_naming_it_and_the_holder(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(f"sqlite:///{tmp_path}/stuck.db", synchronous="NORMAL", store_timeout=0.2)
    await store.open()
    try:
        with turn_held(store.path) as holder:
            with pytest.raises(StoreUnavailableError) as caught:
                await asyncio.wait_for(store.submit_task(new_task()), PATIENCE)
            assert "store_timeout (0.2 s)" in caught.value.message
            assert f"held by process {holder.pid}" in caught.value.message
            # The thread is free again: it answers a read while the turn is still held.
            assert await asyncio.wait_for(store.get_task("nothing"), PATIENCE) is None
            os.kill(holder.pid, signal.SIGKILL)
            holder.wait(timeout=PATIENCE)
            created = await asyncio.wait_for(store.submit_task(new_task()), PATIENCE)
    finally:
        await store.close()

    assert created.created
    assert await store_count(tmp_path / "stuck.db") == 1  # the refused write wrote nothing


async def test_a_foreign_writer_holding_the_lock_past_store_timeout_fails_the_write(
    tmp_path: Path,
) -> None:
    store = SQLiteStore(f"sqlite:///{tmp_path}/held.db", synchronous="NORMAL", store_timeout=0.2)
    await store.open()
    foreign = sqlite3.connect(store.path, isolation_level=None)
    try:
        foreign.execute("BEGIN IMMEDIATE")
        with pytest.raises(StoreUnavailableError) as caught:
            await asyncio.wait_for(store.submit_task(new_task()), PATIENCE)
        assert "past store_timeout" in caught.value.message
        foreign.execute("COMMIT")
        created = await asyncio.wait_for(store.submit_task(new_task()), PATIENCE)
    finally:
        foreign.close()
        await store.close()

    assert created.created
    assert await store_count(tmp_path / "held.db") == 1


async def store_count(db: Path) -> int:
    """Tasks in the database file, read by a connection of the test's own."""
    with closing(sqlite3.connect(db)) as conn:
        count: int = conn.execute("SELECT count(*) FROM tasks").fetchone()[0]
    return count
