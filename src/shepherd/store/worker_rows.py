"""The worker registry's rows, for both backends: the columns and the record they become.

Roles and agents are stored as JSON arrays of names; each backend passes
`instant`, which turns its time column into an aware UTC datetime.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shepherd.core.workers import Worker
from shepherd.payloads import dumps_detail, load_stored
from shepherd.store.rows import Instant

__all__ = ["WORKER_COLUMNS", "names", "worker_from_row"]

WORKER_COLUMNS = "instance, host, pid, roles, agents, started_at, beat_at, stopped_at, died_at"


def names(values: Sequence[str]) -> str:
    """Roles or agent names as the JSON array stored in their column."""
    return dumps_detail(list(values))


def _names(text: str) -> list[str]:
    value = load_stored(text)
    return [str(name) for name in value] if isinstance(value, list) else []


def worker_from_row(row: tuple[Any, ...], instant: Instant) -> Worker:
    """A Worker from a row of WORKER_COLUMNS."""
    return Worker(
        instance=row[0],
        host=row[1],
        pid=row[2],
        roles=tuple(_names(row[3])),
        agents=tuple(_names(row[4])),
        started_at=instant(row[5]),
        beat_at=instant(row[6]),
        stopped_at=None if row[7] is None else instant(row[7]),
        died_at=None if row[8] is None else instant(row[8]),
    )
