"""Retention: which ended tasks and tombstones are old enough to delete, and when to look.

A task that ended (`processed`, `compensated`, `cancelled`) is deleted
`retention` seconds after it ended; a task in `error` waits for an operator and
is never deleted. A deleted task with a business key leaves a `Tombstone`, so
that a submit of the same key within `key_retention` returns the deleted
task's id instead of running the key again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import final

from shepherd.core.states import ProcessState

__all__ = ["ENDED", "Tombstone", "cutoff", "due", "more"]

#: The states a task is purged from: it ended, and nobody needs to act on it.
ENDED = frozenset({ProcessState.PROCESSED, ProcessState.COMPENSATED, ProcessState.CANCELLED})


@final
@dataclass(frozen=True, slots=True, kw_only=True)
class Tombstone:
    """What remains of a purged task that had a business key.

    Attributes:
        task_id: The purged task's id.
        workflow: Its workflow.
        key: Its business key.
        process_state: The state it ended in.
        ended_at: When it ended (its last change).
        purged_at: When it was deleted (store clock).
    """

    task_id: str
    workflow: str
    key: str
    process_state: ProcessState
    ended_at: datetime
    purged_at: datetime


def cutoff(now: datetime, seconds: float) -> datetime | None:
    """`now` minus `seconds`: rows older than that go.

    Returns None when that instant is before the first one a datetime can
    hold: nothing is that old, so nothing goes.
    """
    try:
        return now - timedelta(seconds=seconds)
    except OverflowError:
        return None


def due(last: float | None, *, now: float, interval: float) -> bool:
    """Whether a purge pass is due: never run yet, or `interval` seconds since the last.

    Args:
        last: The monotonic instant of the last pass, or None.
        now: The monotonic instant now.
        interval: Seconds between passes.
    """
    return last is None or now - last >= interval


def more(purged: int, *, limit: int, batches: int, max_batches: int | None) -> bool:
    """Whether to run another batch: the last one was full and the budget allows it.

    Args:
        purged: Rows the last batch deleted.
        limit: The batch size it was given.
        batches: Batches run so far.
        max_batches: The most batches one pass may run (None: no limit).
    """
    return purged >= limit and (max_batches is None or batches < max_batches)
