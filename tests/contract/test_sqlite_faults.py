"""The SQLite store on a full disk and on a damaged file: clear ShepherdErrors, then recovery.

SQLite only (the PostgreSQL faults are in tests/faults). A full disk is a page
budget (`PRAGMA max_page_count`) set on the store's own connection; a damaged
file is a real store file with random bytes written over some of its pages
after it was closed. No driver error and no traceback may reach a caller.
"""

from __future__ import annotations

import asyncio
import random
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from shepherd.cli import run_cli
from shepherd.errors import StoreDamagedError, StoreFullError, StoreUnavailableError
from shepherd.store.migrations import Migration
from shepherd.store.sqlite import SQLiteStore
from shepherd.store.sqlite.connection import migrate
from support.factories import new_task


def _store(path: Path) -> SQLiteStore:
    return SQLiteStore(f"sqlite:///{path}", synchronous="NORMAL")


def _pragma(store: SQLiteStore, statement: str) -> int:
    """Run a PRAGMA on the store's own connection (idle between batches)."""
    conn = store._conn
    assert conn is not None
    row = conn.execute(statement).fetchone()
    return int(row[0]) if row else 0


def _count_begins(store: SQLiteStore) -> list[str]:
    """Every write transaction the store's connection begins from now on."""
    begun: list[str] = []
    conn = store._conn
    assert conn is not None
    conn.set_trace_callback(lambda sql: begun.append(sql) if sql.startswith("BEGIN") else None)
    return begun


async def test_a_full_disk_refuses_writes_with_store_full_then_they_resume(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path / "full.db")
    await store.open()
    try:
        before = [(await store.submit_task(new_task(data={"n": n}))).task_id for n in range(3)]
        _pragma(store, f"PRAGMA max_page_count = {_pragma(store, 'PRAGMA page_count')}")
        begun = _count_begins(store)

        big = "x" * 20_000  # needs pages the budget does not have
        outcomes = await asyncio.gather(
            *(store.submit_task(new_task(data={"big": big, "n": n})) for n in range(3)),
            return_exceptions=True,
        )

        # One batch, failed once for all its callers: not re-run op by op.
        assert begun == ["BEGIN IMMEDIATE"]
        for outcome in outcomes:
            assert isinstance(outcome, StoreFullError), outcome
            assert isinstance(outcome, StoreUnavailableError)
            assert str(outcome) == (
                f"the store's disk is full: {tmp_path / 'full.db'} "
                "(free space, then the roles resume by themselves)"
            )
            assert isinstance(outcome.__cause__, sqlite3.OperationalError)

        # Space again: the very next write works, nothing was lost or half-written.
        _pragma(store, "PRAGMA max_page_count = 1073741823")
        after = await store.submit_task(new_task(data={"big": big}))
        tasks = {task.id: task for task in await store.list_tasks()}
        assert set(tasks) == {*before, after.task_id}
        assert [tasks[task_id].input for task_id in before] == [{"n": n} for n in range(3)]
        assert tasks[after.task_id].input == {"big": big}
    finally:
        await store.close()


async def test_a_full_disk_does_not_leave_the_connection_in_a_transaction(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path / "full.db")
    await store.open()
    try:
        _pragma(store, f"PRAGMA max_page_count = {_pragma(store, 'PRAGMA page_count')}")
        for _ in range(2):  # the second attempt meets the same clear error, not a stuck state
            with pytest.raises(StoreFullError, match="disk is full"):
                await store.submit_task(new_task(data="x" * 20_000))
        conn = store._conn
        assert conn is not None
        assert not conn.in_transaction
    finally:
        await store.close()


def test_a_full_disk_during_migrations_shows_its_own_cause(tmp_path: Path) -> None:
    # A one-row INSERT that runs out of space rolls the whole transaction back
    # by itself; the ROLLBACK that follows must not hide why the migration failed.
    big = "CREATE TABLE big (x);\nINSERT INTO big VALUES (randomblob(100000))"
    with closing(sqlite3.connect(tmp_path / "new.db", isolation_level=None)) as conn:
        conn.execute("PRAGMA max_page_count = 10")
        with pytest.raises(sqlite3.OperationalError, match="database or disk is full"):
            migrate(conn, applied_at=0.0, available=[Migration(1, "big", big)])
        assert not conn.in_transaction


async def _closed_store_with_tasks(path: Path, count: int = 60) -> None:
    store = _store(path)
    await store.open()
    for n in range(count):
        await store.submit_task(new_task(data={"n": n, "pad": "p" * 200}))
    await store.close()
    assert not path.with_name(path.name + "-wal").exists(), "the WAL was not checkpointed"


def _damage(path: Path, pages: list[int]) -> None:
    """Write random bytes over the given pages (1-based) of a closed SQLite file."""
    with closing(sqlite3.connect(path)) as conn:
        size = conn.execute("PRAGMA page_size").fetchone()[0]
    noise = random.Random(7)
    with path.open("r+b") as file:
        for page in pages:
            file.seek((page - 1) * size)
            file.write(noise.randbytes(size))


def _root_page(path: Path, table: str) -> int:
    with closing(sqlite3.connect(path)) as conn:
        row = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,))
        return int(row.fetchone()[0])


def _damaged_message(path: Path) -> str:
    return f"the store file {path} is damaged (database disk image is malformed): "


async def test_a_damaged_file_is_refused_at_open_and_ever_after(tmp_path: Path) -> None:
    path = tmp_path / "damaged.db"
    await _closed_store_with_tasks(path)
    _damage(path, [2, 3, 4])

    store = _store(path)
    try:
        with pytest.raises(StoreDamagedError) as caught:
            await store.open()
        assert str(caught.value) == (
            _damaged_message(path) + "run `PRAGMA integrity_check`, restore from a backup"
        )
        assert not isinstance(caught.value, StoreUnavailableError)  # workers stop, not retry
        # Every later use tries again and meets the same error, never a raw sqlite3 one.
        for _ in range(2):
            with pytest.raises(StoreDamagedError, match="is damaged"):
                await store.list_tasks()
            with pytest.raises(StoreDamagedError, match="is damaged"):
                await store.submit_task(new_task())
    finally:
        await store.close()


async def test_damaged_rows_fail_reads_and_writes_with_store_damaged(tmp_path: Path) -> None:
    path = tmp_path / "damaged.db"
    await _closed_store_with_tasks(path)
    _damage(path, [_root_page(path, "tasks")])

    store = _store(path)
    await store.open()  # the schema's own pages are intact
    try:
        for _ in range(2):
            with pytest.raises(StoreDamagedError, match="is damaged"):
                await store.list_tasks()
            with pytest.raises(StoreDamagedError, match="is damaged"):
                await store.submit_task(new_task())
    finally:
        await store.close()


@pytest.mark.parametrize("damage", ["pages", "header"])
def test_the_cli_reports_a_damaged_store_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    path = tmp_path / "damaged.db"
    asyncio.run(_closed_store_with_tasks(path))
    if damage == "pages":
        _damage(path, [2, 3, 4])
        detail = "database disk image is malformed"
    else:
        path.write_bytes(b"\xff" * 100 + path.read_bytes()[100:])
        detail = "file is not a database"

    code = run_cli(["tasks", "--store", f"sqlite:///{path}"])

    out, err = capsys.readouterr()
    assert code == 6  # the store is unavailable or damaged
    assert out == ""
    assert "Traceback" not in err
    assert err.splitlines() == [
        f"error: the store file {path} is damaged ({detail}): "
        "run `PRAGMA integrity_check`, restore from a backup"
    ]
