"""Fixtures for the pure core's tests: a fixed instant and a task factory."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from shepherd.core.records import Task
from support.records import task_record

NOW = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)

TaskFactory = Callable[..., Task]


def make_task(**changes: Any) -> Task:
    """A pending, unowned task created at NOW, with `changes` applied."""
    return task_record(**{"not_before": NOW, "created_at": NOW, "updated_at": NOW, **changes})


@pytest.fixture
def task_factory() -> TaskFactory:
    """`task_factory(process_state=..., ...)`: a task in a given state."""
    return make_task
