"""Fixtures for the pure core's tests: a fixed instant and a task factory."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from shepherd.core.records import Task
from shepherd.core.states import ProcessState

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)

TaskFactory = Callable[..., Task]


def make_task(**changes: Any) -> Task:
    """A pending, unowned task created at NOW, with `changes` applied."""
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


@pytest.fixture
def task_factory() -> TaskFactory:
    """`task_factory(process_state=..., ...)`: a task in a given state."""
    return make_task
