"""What waits and what ended: the queues' depths per agent, tasks in some states, ended tasks.

`QueueDepths` reads only rows in flight: a request is deleted when it is
answered or its step moves on, and the calls' scan keeps to the unanswered
ones (the partial indexes `calls_waiting` and `calls_of_key`); instants are
the database's.
`CountTasksIn` is an index-only scan of the states asked for (`tasks_state`),
never the ended tasks' ranges unless asked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shepherd.core.states import ProcessState
from shepherd.store.depth_rows import queue_depths
from shepherd.store.ops import CountTasksIn, EndedCounts, QueueDepths
from shepherd.store.postgres.reader import READS, Reader, read
from shepherd.store.sql import depths as counts
from shepherd.store.sql.dialect import POSTGRES

if TYPE_CHECKING:
    from shepherd.core.records import QueueDepth

__all__ = ["count_in", "depths", "ended_counts"]

_COUNT_IN = (
    "SELECT process_state, count(*) FROM tasks WHERE process_state = ANY(%s::text[]) "
    "GROUP BY process_state"
)
# Taken requests are hidden until their complete_by, so "live" is complete_by > now.
_REQUESTS = (
    "SELECT agent, count(*) FILTER (WHERE taken_by IS NULL), "
    "count(*) FILTER (WHERE taken_by IS NOT NULL) FROM requests "
    "WHERE complete_by > coalesce(%s::timestamptz, now()) GROUP BY agent"
)
# A taken call is hidden (visible_at) until its handling's window ends. Unanswered
# calls are in one of two partial indexes: calls_waiting (no owning key) or
# calls_of_key; an answered call, kept until it expires, is read by neither.
_CALLS = (
    "SELECT agent, count(*) FILTER (WHERE visible_at <= at), count(*) FILTER (WHERE visible_at > at) "
    "FROM (SELECT agent, visible_at, expires_at FROM calls WHERE answered_at IS NULL "
    "AND owner_key IS NULL UNION ALL SELECT agent, visible_at, expires_at FROM calls "
    "WHERE answered_at IS NULL AND owner_key IS NOT NULL) AS c, "
    "(SELECT coalesce(%s::timestamptz, now()) AS at) AS clock "
    "WHERE expires_at > at GROUP BY agent"
)


@READS.handles(QueueDepths)
async def depths(reader: Reader, op: QueueDepths) -> list[QueueDepth]:
    """Per agent, its requests and calls waiting and taken now."""
    at = reader.clock_param()
    requests = await reader.fetch(_REQUESTS, (at,))
    calls = await reader.fetch(_CALLS, (at,))
    return queue_depths(requests, calls)


@READS.handles(CountTasksIn)
async def count_in(reader: Reader, op: CountTasksIn) -> dict[ProcessState, int]:
    """How many tasks are in each of the operation's states (absent when none)."""
    rows = await reader.fetch(_COUNT_IN, ([state.value for state in op.states],))
    return {ProcessState(state): int(n) for state, n in rows}


@READS.handles(EndedCounts)
async def ended_counts(reader: Reader, op: EndedCounts) -> dict[tuple[int, ProcessState], int]:
    """Tasks ended since `op.since`, by (slice, state) (`store.sql.depths`)."""
    return await read(reader, counts.ended_counts(POSTGRES, op))
