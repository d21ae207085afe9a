"""Retention, for both backends: the tombstones of purged keys, and the words of a purge.

A purge deletes ended tasks older than a cut-off with every row that names
them, and writes a tombstone for each keyed one, so that a purged key keeps
returning its task; how it deletes differs (one statement with data-modifying
`WITH`s on PostgreSQL, one per table on SQLite), what it writes does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from shepherd.store.rows import TOMBSTONE_COLUMNS
from shepherd.store.sql.plan import Query, changed, first

if TYPE_CHECKING:
    from shepherd.core.retention import Tombstone
    from shepherd.store.ops import GetTombstone, PurgeTombstones
    from shepherd.store.sql.dialect import Dialect
    from shepherd.store.sql.plan import Plan, Writing

__all__ = ["ENDED", "TOMBSTONE", "get_tombstone", "purge_tombstones"]

#: The ended tasks: the predicate of the partial index `tasks_ended`, word for
#: word, so that the planners use it.
ENDED = "process_state IN ('processed', 'compensated', 'cancelled')"
#: A tombstone's insert, before its values: (task_id, workflow, key,
#: process_state, ended_at, purged_at); the key's latest purge wins.
TOMBSTONE = (
    "INSERT INTO tombstones (task_id, workflow, key, process_state, ended_at, purged_at) {} "
    "ON CONFLICT (workflow, key) DO UPDATE SET "
    "task_id = excluded.task_id, process_state = excluded.process_state, "
    "ended_at = excluded.ended_at, purged_at = excluded.purged_at"
)
# (purged_before, limit): the oldest tombstones, locked with SKIP LOCKED on
# PostgreSQL, so that two purgers never wait for each other.
_PURGE_TOMBSTONES = (
    "DELETE FROM tombstones WHERE task_id IN (SELECT task_id FROM tombstones "
    "WHERE purged_at < ? ORDER BY purged_at LIMIT ?{skip_locked}){changed}"
)
# (created_before, limit): the oldest bulk requests' idempotency keys.
_PURGE_BULK_KEYS = (
    "DELETE FROM bulk_requests WHERE key IN (SELECT key FROM bulk_requests "
    "WHERE created_at < ? ORDER BY created_at LIMIT ?{skip_locked})"
)
_GET_TOMBSTONE = f"SELECT {TOMBSTONE_COLUMNS} FROM tombstones WHERE task_id = ?"


def purge_tombstones(batch: Writing, ops: Sequence[PurgeTombstones]) -> Plan[list[object]]:
    """Delete tombstones written before each item's instant, oldest first; how many were."""
    d = batch.dialect
    sql = d.sql(_PURGE_TOMBSTONES)
    keys = d.sql(_PURGE_BULK_KEYS)
    found = yield [
        *(changed(sql, [(d.stored(op.purged_before), op.limit)]) for op in ops),
        *(Query(keys, (d.stored(op.purged_before), op.limit), rows=False) for op in ops),
    ]
    return [int(rows[0][0]) for rows in found[: len(ops)]]


def get_tombstone(d: Dialect, op: GetTombstone) -> Plan[Tombstone | None]:
    """The tombstone of a purged task, or None."""
    row = yield from first(d.sql(_GET_TOMBSTONE), (op.task_id,))
    return None if row is None else d.records.tombstone(row)
