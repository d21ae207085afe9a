"""Batch handlers and reads for retention: purges, tombstones, WAL checkpoints.

The batch's transaction holds the database's write lock (BEGIN IMMEDIATE), so
the ended tasks a purge selects cannot change before it deletes them.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.store.ops import GetTombstone, PurgeTasks, PurgeTombstones
from shepherd.store.sql import retention
from shepherd.store.sql.dialect import SQLITE
from shepherd.store.sql.retention import ENDED, TOMBSTONE
from shepherd.store.sqlite.batch import READS, WRITES, Reading
from shepherd.store.sqlite.rows import chunks

if TYPE_CHECKING:
    from shepherd.core.retention import Tombstone
    from shepherd.store.sqlite.batch import SqliteBatch

__all__ = ["checkpoint", "get_tombstone", "purge_tasks", "purge_tombstones", "purged_key"]

log = logging.getLogger("shepherd.store.sqlite")

# The predicate repeats the partial index's (tasks_ended) word for word, as SQLite
# needs to use it; without statistics it would rather take tasks_state and sort
# every ended task, hence INDEXED BY.
_ENDED = (
    "SELECT id, workflow, key, process_state, updated_at FROM tasks INDEXED BY tasks_ended "
    f"WHERE {ENDED} AND updated_at < ? ORDER BY updated_at LIMIT ?"
)
_BY_TASK = ("steps", "events", "requests", "replies", "signals")
# A task's done keys are `task_id/seq` and `task_id/seq/name`: the keys from
# `task_id/` up to `task_id0` ('0' follows '/'), a range of the primary key.
_DONE_KEYS = "DELETE FROM done_keys WHERE key >= ? AND key < ?"
_TOMBSTONE = TOMBSTONE.format("VALUES (?, ?, ?, ?, ?, ?)")
_PURGED_KEY = "SELECT task_id FROM tombstones WHERE workflow = ? AND key = ?"


@WRITES.handles(PurgeTasks)
def purge_tasks(batch: SqliteBatch, ops: Sequence[PurgeTasks]) -> list[object]:
    """Delete ended tasks older than each item's instant, with all their rows."""
    return [_purge(batch, op.ended_before.timestamp(), op.limit) for op in ops]


def _purge(batch: SqliteBatch, ended_before: float, limit: int) -> int:
    """Purge up to `limit` tasks ended before `ended_before`; how many were."""
    conn = batch.conn
    rows = conn.execute(_ENDED, (ended_before, limit)).fetchall()
    ids = [row["id"] for row in rows]
    for chunk in chunks(ids):
        marks = ",".join("?" * len(chunk))
        for table in _BY_TASK:
            conn.execute(f"DELETE FROM {table} WHERE task_id IN ({marks})", chunk)
        conn.execute(f"DELETE FROM tasks WHERE id IN ({marks})", chunk)
        links = f"DELETE FROM task_children WHERE child_id IN ({marks}) OR parent_id IN ({marks})"
        conn.execute(links, [*chunk, *chunk])
    conn.executemany(_DONE_KEYS, [(task_id + "/", task_id + "0") for task_id in ids])
    conn.executemany(
        _TOMBSTONE,
        [
            (r["id"], r["workflow"], r["key"], r["process_state"], r["updated_at"], batch.now)
            for r in rows
            if r["key"] is not None
        ],
    )
    return len(ids)


@WRITES.handles(PurgeTombstones)
def purge_tombstones(batch: SqliteBatch, ops: Sequence[PurgeTombstones]) -> list[object]:
    """Delete tombstones written before each item's instant, oldest first."""
    return batch.run(retention.purge_tombstones(batch, ops))


def purged_key(conn: sqlite3.Connection, workflow: str, key: str) -> str | None:
    """The id of the purged task whose tombstone holds (workflow, key), if any."""
    row = conn.execute(_PURGED_KEY, (workflow, key)).fetchone()
    return None if row is None else str(row["task_id"])


@READS.handles(GetTombstone)
def get_tombstone(at: Reading, op: GetTombstone) -> Tombstone | None:
    """The tombstone of a purged task, or None."""
    return at.run(retention.get_tombstone(SQLITE, op))


def checkpoint(conn: sqlite3.Connection, busy_timeout: float) -> None:
    """Copy the WAL into the database file and truncate it, waiting for no one.

    Without a busy handler, a TRUNCATE checkpoint that meets a reader or a
    writer of another process copies what it can (as a PASSIVE one does) and
    returns at once; the WAL is then truncated by a later pass, or down to
    `journal_size_limit` when a writer starts it over. The connection's busy
    timeout is put back afterwards.
    """
    try:
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
    except sqlite3.Error as exc:
        log.debug("SQLite store: checkpoint skipped: %s", exc)
        return
    if busy:
        log.debug("SQLite store: checkpoint copied %d of %d frames (in use)", copied, frames)
