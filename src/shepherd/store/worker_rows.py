"""The worker registry's rows, for both backends: the columns and the record they become.

Roles and agents are stored as JSON arrays of names; each backend passes
`instant`, which turns its time column into an aware UTC datetime.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from shepherd.core.workers import Worker
from shepherd.payloads import dumps_detail, load_stored
from shepherd.store.rows import Columns, Instant, Row

__all__ = ["WORKER_COLUMNS", "WorkerCol", "names", "worker_from_row"]


class WorkerCol(Columns):
    """A row of WORKER_COLUMNS."""

    INSTANCE: ClassVar[int]
    HOST: ClassVar[int]
    PID: ClassVar[int]
    ROLES: ClassVar[int]
    AGENTS: ClassVar[int]
    STARTED_AT: ClassVar[int]
    BEAT_AT: ClassVar[int]
    STOPPED_AT: ClassVar[int]
    DIED_AT: ClassVar[int]


WORKER_COLUMNS = WorkerCol.select()


def names(values: Sequence[str]) -> str:
    """Roles or agent names as the JSON array stored in their column."""
    return dumps_detail(list(values))


def _names(text: str) -> tuple[str, ...]:
    value = load_stored(text)
    return tuple(str(name) for name in value) if isinstance(value, list) else ()


def worker_from_row(row: Row, instant: Instant) -> Worker:
    """A Worker from a row of WORKER_COLUMNS."""
    instance, host, pid, roles, agents, started_at, beat_at, stopped_at, died_at = row
    return Worker(
        instance=instance,
        host=host,
        pid=pid,
        roles=_names(roles),
        agents=_names(agents),
        started_at=instant(started_at),
        beat_at=instant(beat_at),
        stopped_at=None if stopped_at is None else instant(stopped_at),
        died_at=None if died_at is None else instant(died_at),
    )
