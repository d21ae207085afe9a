"""BEGIN IMMEDIATE that looks again within a millisecond while another connection writes.

Real SQLite files and two real connections; the waits go through a fake
`sleep` (which frees the lock when the test says so) and a fake `monotonic`,
so nothing here waits for real.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

import pytest

from shepherd.store.sqlite.connection import begin_immediate

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[sqlite3.Connection, sqlite3.Connection]]:
    path = str(tmp_path / "lock.db")
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("PRAGMA journal_mode = WAL")
    holder.execute("CREATE TABLE t (x INTEGER)")
    writer = sqlite3.connect(path, isolation_level=None, timeout=30.0)
    writer.execute("PRAGMA busy_timeout = 30000")
    try:
        yield holder, writer
    finally:
        holder.close()
        writer.close()


def test_it_begins_at_once_when_no_one_writes(
    pair: tuple[sqlite3.Connection, sqlite3.Connection],
) -> None:
    _, writer = pair
    slept: list[float] = []

    begin_immediate(writer, busy_timeout=30.0, sleep=slept.append)

    assert writer.in_transaction
    assert slept == []
    assert writer.execute("PRAGMA busy_timeout").fetchone() == (30000,)
    writer.execute("ROLLBACK")


def test_it_looks_again_in_short_waits_until_the_lock_is_freed(
    pair: tuple[sqlite3.Connection, sqlite3.Connection],
) -> None:
    holder, writer = pair
    holder.execute("BEGIN IMMEDIATE")
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        if len(slept) == 6:
            holder.execute("COMMIT")

    begin_immediate(writer, busy_timeout=30.0, sleep=sleep, monotonic=lambda: 0.0)

    assert writer.in_transaction
    # Never SQLite's 1, 2, 5, 10 ms: sub-millisecond looks first, then one a millisecond.
    assert slept == [0.00005, 0.0001, 0.0002, 0.0005, 0.001, 0.001]
    # The connection's own busy handler is back for every other statement.
    assert writer.execute("PRAGMA busy_timeout").fetchone() == (30000,)
    writer.execute("ROLLBACK")


def test_it_gives_up_with_sqlites_own_error_at_the_busy_timeout(
    pair: tuple[sqlite3.Connection, sqlite3.Connection],
) -> None:
    holder, writer = pair
    holder.execute("BEGIN IMMEDIATE")
    clock = [100.0]

    def sleep(seconds: float) -> None:
        clock[0] += seconds + 0.4

    with pytest.raises(sqlite3.OperationalError, match="locked") as caught:
        begin_immediate(writer, busy_timeout=2.0, sleep=sleep, monotonic=lambda: clock[0])

    assert caught.value.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY
    assert clock[0] >= 102.0
    assert not writer.in_transaction
    assert writer.execute("PRAGMA busy_timeout").fetchone() == (2000,)
    holder.execute("ROLLBACK")


def test_an_error_other_than_a_lock_is_raised_at_once(
    pair: tuple[sqlite3.Connection, sqlite3.Connection],
) -> None:
    _, writer = pair
    writer.execute("BEGIN")  # already in a transaction: BEGIN IMMEDIATE fails, not busy
    slept: list[float] = []

    with pytest.raises(sqlite3.OperationalError, match="within a transaction"):
        begin_immediate(writer, busy_timeout=30.0, sleep=slept.append)

    assert slept == []
    writer.execute("ROLLBACK")
