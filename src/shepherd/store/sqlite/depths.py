"""What waits and what ended: the queues' depths per agent, tasks in some states, ended tasks.

`QueueDepths` reads only rows in flight: a request is deleted when it is
answered or its step moves on, and the calls' scan keeps to the unanswered
ones (the partial indexes `calls_waiting` and `calls_of_key`). `CountTasksIn`
counts the index range of each state asked for (`tasks_state`), never the
ended tasks' ranges unless asked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shepherd.core.states import ProcessState
from shepherd.store.depth_rows import queue_depths
from shepherd.store.ops import CountTasksIn, EndedCounts, QueueDepths
from shepherd.store.sql import depths as counts
from shepherd.store.sql.dialect import SQLITE
from shepherd.store.sqlite.batch import READS, Reading

if TYPE_CHECKING:
    from shepherd.core.records import QueueDepth

__all__ = ["count_in", "depths", "ended_counts"]

# One indexed count per state: SQLite walks the (process_state, created_at) range of each.
_COUNT_IN = "SELECT count(*) FROM tasks WHERE process_state = ?"
# (now): taken requests are hidden until their complete_by, so "live" is complete_by > now.
_REQUESTS = (
    "SELECT agent, sum(taken_by IS NULL), sum(taken_by IS NOT NULL) FROM requests "
    "WHERE complete_by > ? GROUP BY agent"
)
# (now, now, now, now): a taken call is hidden (visible_at) until its handling's window
# ends. Unanswered calls are in one of two partial indexes: calls_waiting (no owning
# key) or calls_of_key; an answered call, kept until it expires, is read by neither.
_CALLS = (
    "SELECT agent, sum(visible_at <= ?), sum(visible_at > ?) FROM ("
    "SELECT agent, visible_at FROM calls INDEXED BY calls_waiting WHERE answered_at IS NULL "
    "AND owner_key IS NULL AND expires_at > ? "
    "UNION ALL SELECT agent, visible_at FROM calls INDEXED BY calls_of_key "
    "WHERE answered_at IS NULL AND owner_key IS NOT NULL AND expires_at > ?) GROUP BY agent"
)


@READS.handles(QueueDepths)
def depths(at: Reading, op: QueueDepths) -> list[QueueDepth]:
    """Per agent, its requests and calls waiting and taken now."""
    conn, now = at.conn, at.now
    requests = conn.execute(_REQUESTS, (now,)).fetchall()
    calls = conn.execute(_CALLS, (now, now, now, now)).fetchall()
    return queue_depths(requests, calls)


@READS.handles(CountTasksIn)
def count_in(at: Reading, op: CountTasksIn) -> dict[ProcessState, int]:
    """How many tasks are in each of the operation's states (absent when none)."""
    counts = {
        state: at.conn.execute(_COUNT_IN, (state.value,)).fetchone()[0] for state in op.states
    }
    return {state: int(n) for state, n in counts.items() if n}


@READS.handles(EndedCounts)
def ended_counts(at: Reading, op: EndedCounts) -> dict[tuple[int, ProcessState], int]:
    """Tasks ended since `op.since`, by (slice, state) (`store.sql.depths`)."""
    return at.run(counts.ended_counts(SQLITE, op))
