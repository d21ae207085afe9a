"""The task list's keyset cursor: a URL-safe text that reads back exactly, and refuses anything else."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from shepherd import TaskCursor
from shepherd.errors import ConfigError
from support.records import task_record


@pytest.mark.parametrize(
    "at",
    [
        datetime(2026, 11, 26, 22, 1, 2, 345678, tzinfo=UTC),
        datetime(1970, 1, 1, tzinfo=UTC),
        datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(2026, 1, 1, 12, tzinfo=timezone(timedelta(hours=-5))),
        datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    ],
)
def test_encode_reads_back_to_the_same_instant_and_id(at: datetime) -> None:
    cursor = TaskCursor(created_at=at, task_id="01a21a0cc16333c1c5fe")
    text = cursor.encode()

    assert re.fullmatch(r"[A-Za-z0-9._-]+", text), "URL-safe"
    back = TaskCursor.decode(text)
    assert back == cursor
    assert back.created_at.tzinfo is UTC


def test_of_continues_after_the_task() -> None:
    task = task_record(id="01a21a0cc16333c1c5fe")
    assert TaskCursor.of(task) == TaskCursor(created_at=task.created_at, task_id=task.id)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "abc",
        "123",
        "123.",
        ".abc",
        "12.ab.cd",
        "1x.abc",
        "12.a b",
        "12.<script>",
        "9" * 30 + ".abc",
        "999999999999999999.abc",  # past year 9999
        "12." + "a" * 101,
        None,
        12,
    ],
)
def test_anything_else_is_refused_naming_the_cursor(text: Any) -> None:
    with pytest.raises(ConfigError) as caught:
        TaskCursor.decode(text)
    assert caught.value.field == "cursor"
