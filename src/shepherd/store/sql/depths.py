"""The overview's counts, for both backends: tasks ended by time slice (`ended_counts`).

Ended tasks are counted through the partial indexes that hold only them
(`tasks_ended`, `tasks_errors`), so the overview reads the last hour's tasks,
never the live ones. The slice of a task is the whole number of buckets from
`since` to its last change, in the backend's time arithmetic; SQLite is told
which index to use (`INDEXED BY`), and finds it only if the predicate repeats
the index's word for word.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from shepherd.core.states import ProcessState
from shepherd.store.sql.plan import one

if TYPE_CHECKING:
    from shepherd.store.ops import EndedCounts
    from shepherd.store.sql.dialect import Dialect
    from shepherd.store.sql.plan import Plan

__all__ = ["ended_counts"]

# (since, bucket): the slice of `updated_at`, per dialect.
_SLICE = {
    "sqlite": "CAST((updated_at - ?) / ? AS INTEGER)",
    "postgres": "floor(extract(epoch FROM updated_at - ?) / ?)::bigint",
}


def _ended(name: str) -> str:
    """The statement in dialect `name`: (since, bucket, since) twice, ended tasks then errors."""
    indexed = " INDEXED BY {}" if name == "sqlite" else ""
    return (
        f"SELECT {_SLICE[name]}, process_state, count(*) "
        f"FROM tasks{indexed.format('tasks_ended')} "
        "WHERE process_state IN ('processed', 'compensated', 'cancelled') AND updated_at >= ? "
        f"GROUP BY 1, 2 UNION ALL SELECT {_SLICE[name]}, 'error', count(*) "
        f"FROM tasks{indexed.format('tasks_errors')} "
        "WHERE process_state = 'error' AND updated_at >= ? GROUP BY 1"
    )


_ENDED = {name: _ended(name) for name in _SLICE}


def ended_counts(d: Dialect, op: EndedCounts) -> Plan[dict[tuple[int, ProcessState], int]]:
    """Tasks ended since `op.since`, by (slice, state)."""
    since, width = d.stored(op.since), op.bucket
    rows = yield from one(d.sql(_ENDED[d.name]), (since, width, since, since, width, since))
    return {(int(index), ProcessState(state)): int(count) for index, state, count in rows}
