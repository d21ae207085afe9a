"""Records built in memory, for tests of pure code and of rendering (no store involved)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from shepherd.core.records import Task
from shepherd.core.states import ProcessState

#: The instant every record here is stamped with, unless a test says otherwise.
NOW = datetime(2025, 1, 31, 12, 0, tzinfo=UTC)


def task_record(**changes: Any) -> Task:
    """A pending, unowned task "t1" of workflow "orders.place" created at NOW, with `changes`."""
    task = Task(
        id="t1",
        workflow="orders.place",
        key=None,
        input={"order": 1},
        process_state=ProcessState.PENDING,
        locked_by=None,
        lock_epoch=0,
        complete_by=None,
        failure_count=0,
        not_before=NOW,
        reply_to=None,
        created_at=NOW,
        updated_at=NOW,
    )
    return replace(task, **changes)
