"""Batch handlers and reads for the worker registry.

Rows are timed on the batch's instant (the database's clock), so processes on
machines whose clocks disagree still agree on which of them are alive. The
reads compare with the database's `now()` too (or the test clock's instant).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

from shepherd.store.contract import WORKER_RETENTION
from shepherd.store.postgres.rows import utc
from shepherd.store.worker_rows import WORKER_COLUMNS, names, worker_from_row

if TYPE_CHECKING:
    from shepherd.store.postgres.batch import Batch

__all__ = ["ALIVE", "LIST", "LIST_SINCE", "beat", "register", "stop"]

_RETENTION = timedelta(seconds=WORKER_RETENTION)

_REGISTER = (
    "INSERT INTO workers AS w (instance, host, pid, roles, agents, started_at, beat_at, "
    "stopped_at) VALUES (%s, %s, %s, %s, %s, %s, %s, NULL) ON CONFLICT (instance) DO UPDATE SET "
    "host = excluded.host, pid = excluded.pid, roles = excluded.roles, "
    "agents = excluded.agents, started_at = excluded.started_at, beat_at = excluded.beat_at, "
    f"stopped_at = NULL, died_at = NULL, reaped_at = NULL RETURNING {WORKER_COLUMNS}"
)
_FORGET = "DELETE FROM workers WHERE coalesce(stopped_at, beat_at) < %s"
_BEAT = "UPDATE workers SET beat_at = %s, died_at = NULL, reaped_at = NULL WHERE instance = %s AND stopped_at IS NULL RETURNING instance"
_STOP = "UPDATE workers SET stopped_at = %s WHERE instance = %s AND stopped_at IS NULL"

LIST = f"SELECT {WORKER_COLUMNS} FROM workers ORDER BY started_at DESC, instance"
LIST_SINCE = (
    f"SELECT {WORKER_COLUMNS} FROM workers WHERE coalesce(stopped_at, beat_at) >= %s "
    "ORDER BY started_at DESC, instance"
)
#: The live ones among instances: (instances, now or NULL for the database's, ttl).
ALIVE = (
    "SELECT instance FROM workers WHERE instance = ANY(%s::text[]) AND stopped_at IS NULL "
    "AND died_at IS NULL AND beat_at > coalesce(%s::timestamptz, now()) - %s * interval '1 second'"
)


async def register(
    batch: Batch, items: Sequence[tuple[str, str, int, tuple[str, ...], tuple[str, ...]]]
) -> list[object]:
    """Write each process's row afresh; forget rows silent for longer than the retention."""
    now = batch.now
    await batch.send(_FORGET, (now - _RETENTION,))
    cursors = [
        await batch.send(_REGISTER, (instance, host, pid, names(roles), names(agents), now, now))
        for instance, host, pid, roles, agents in items
    ]
    out: list[object] = []
    for cursor in cursors:
        row = await cursor.fetchone()
        if row is None:  # pragma: no cover - an upsert with RETURNING returns its row
            raise RuntimeError("worker registration returned no row")
        out.append(worker_from_row(row, utc))
    return out


async def beat(batch: Batch, items: Sequence[str]) -> list[object]:
    """Heartbeats: True for each row beaten, False where it is gone or stopped."""
    cursors = [await batch.send(_BEAT, (batch.now, instance)) for instance in items]
    return [await cursor.fetchone() is not None for cursor in cursors]


async def stop(batch: Batch, items: Sequence[str]) -> list[object]:
    """Mark rows stopped (graceful stops)."""
    for instance in items:
        await batch.send(_STOP, (batch.now, instance))
    return [None] * len(items)
