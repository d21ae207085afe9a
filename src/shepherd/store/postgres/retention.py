"""Batch handlers and reads for retention: purging ended tasks, tombstones of their keys.

A purge is one statement: it locks up to `limit` ended tasks older than the
cut-off (`SKIP LOCKED`, so two purgers never wait for each other), writes the
tombstones of the keyed ones and deletes the tasks with every row that names
them. Submits consult the tombstones (see `tasks.submit`) so that a purged key
keeps returning its task.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.store.ops import GetTombstone, PurgeTasks, PurgeTombstones
from shepherd.store.postgres.batch import WRITES
from shepherd.store.postgres.reader import READS, read
from shepherd.store.sql import retention
from shepherd.store.sql.dialect import POSTGRES
from shepherd.store.sql.retention import ENDED, TOMBSTONE

if TYPE_CHECKING:
    from psycopg import AsyncCursor
    from psycopg.rows import TupleRow

    from shepherd.core.retention import Tombstone
    from shepherd.store.postgres.batch import PostgresBatch
    from shepherd.store.postgres.reader import Reader

__all__ = ["PURGED_KEYS", "purge_tasks", "purge_tombstones", "purged_keys"]

# The predicate repeats the partial index's (tasks_ended) word for word, so the
# planner uses it. A task's done keys are `task_id/seq[/name]`: the keys from
# `task_id/` up to `task_id0` ('0' follows '/') in byte order (done_keys_bytes).
_PURGE = (
    "WITH doomed AS (SELECT id, workflow, key, process_state, updated_at FROM tasks "
    f"WHERE {ENDED} AND updated_at < %b "
    "ORDER BY updated_at LIMIT %b FOR UPDATE SKIP LOCKED), "
    "tombstoned AS ("
    + TOMBSTONE.format(
        "SELECT id, workflow, key, process_state, updated_at, %b FROM doomed WHERE key IS NOT NULL"
    )
    + "), "
    "steps_gone AS (DELETE FROM steps WHERE task_id IN (SELECT id FROM doomed)), "
    "events_gone AS (DELETE FROM events WHERE task_id IN (SELECT id FROM doomed)), "
    "requests_gone AS (DELETE FROM requests WHERE task_id IN (SELECT id FROM doomed)), "
    "replies_gone AS (DELETE FROM replies WHERE task_id IN (SELECT id FROM doomed)), "
    "signals_gone AS (DELETE FROM signals WHERE task_id IN (SELECT id FROM doomed)), "
    "links_gone AS (DELETE FROM task_children WHERE child_id IN (SELECT id FROM doomed) "
    "OR parent_id IN (SELECT id FROM doomed)), "
    "keys_gone AS (DELETE FROM done_keys k USING doomed "
    "WHERE k.key COLLATE \"C\" >= doomed.id || '/' AND k.key COLLATE \"C\" < doomed.id || '0'), "
    "tasks_gone AS (DELETE FROM tasks WHERE id IN (SELECT id FROM doomed) RETURNING id) "
    "SELECT count(*) FROM tasks_gone"
)
#: The tombstones among (workflows, keys).
PURGED_KEYS = (
    "SELECT d.workflow, d.key, d.task_id FROM tombstones d "
    "JOIN unnest(%b::text[], %b::text[]) AS k(workflow, key) "
    "ON d.workflow = k.workflow AND d.key = k.key"
)


@WRITES.handles(PurgeTasks)
async def purge_tasks(batch: PostgresBatch, ops: Sequence[PurgeTasks]) -> list[object]:
    """Delete ended tasks older than each item's instant, with all their rows."""
    # The planner cannot estimate the done keys' ranges, overestimates the
    # statement's cost and would JIT-compile it: a second instead of milliseconds.
    await batch.send("SET LOCAL jit = off")
    cursors = [await batch.send(_PURGE, (op.ended_before, op.limit, batch.now)) for op in ops]
    await batch.send("SET LOCAL jit TO DEFAULT")
    return [await _count(cursor) for cursor in cursors]


@WRITES.handles(PurgeTombstones)
async def purge_tombstones(batch: PostgresBatch, ops: Sequence[PurgeTombstones]) -> list[object]:
    """Delete tombstones written before each item's instant, oldest first."""
    return await batch.run(retention.purge_tombstones(batch, ops))


async def purged_keys(
    batch: PostgresBatch, keys: Sequence[tuple[str, str]]
) -> AsyncCursor[TupleRow]:
    """Send the look-up of tombstones for (workflow, key) pairs; read it later."""
    return await batch.send(PURGED_KEYS, ([w for w, _ in keys], [k for _, k in keys]))


async def _count(cursor: AsyncCursor[TupleRow]) -> int:
    row = await cursor.fetchone()
    if row is None:
        return 0
    (count,) = row
    return int(count)


# -- reads ---------------------------------------------------------------------
@READS.handles(GetTombstone)
async def get_tombstone(reader: Reader, op: GetTombstone) -> Tombstone | None:
    """The tombstone of a purged task, or None."""
    return await read(reader, retention.get_tombstone(POSTGRES, op))
