"""Migration 19 on a store that already holds alerts: they follow their tasks from then on.

A store at migration 18 kept every alert open until acknowledged, one per
failure. Migrating it resolves the alerts of tasks that ended well (or were
deleted by retention, which deletes only ended ones), folds a task's several
open alerts into its newest one (raised as many times), and flags the tasks
whose alerts are not resolved, so that their end resolves them.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
import pytest

from shepherd.core.alerts import AlertState
from shepherd.store.migrations import migrations, statements
from shepherd.store.sqlite import path_from_url

if TYPE_CHECKING:
    from shepherd.testing import FakeClock
    from support.factories import Backend

BEFORE = 19
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

_TASK = (
    "INSERT INTO tasks (id, workflow, key, input, process_state, lock_epoch, complete_within, "
    "failure_count, not_before, reply_to, created_at, updated_at) "
    "VALUES (?, 'orders.pay', NULL, '{}', ?, 1, 30, 0, ?, NULL, ?, ?)"
)
_ALERT = (
    "INSERT INTO alerts (id, task_id, workflow, reason, failure_count, raised_at, "
    "acknowledged_at, acknowledged_by) VALUES (?, ?, 'orders.pay', ?, 0, ?, ?, ?)"
)


def _rows(at: float | datetime) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    """The tasks and alerts of a store at migration 18, its instants `at` (a backend's type)."""
    tasks: list[tuple[object, ...]] = [
        ("done", "processed", at, at, at),
        ("failing", "error", at, at, at),
    ]
    alerts: list[tuple[object, ...]] = [
        (1, "done", "bug", at, None, None),
        (2, "done", "bug again", at, None, None),
        (3, "failing", "first", at, at, "anna"),
        (4, "failing", "second", at, None, None),
        (5, "failing", "third", at, None, None),
        (6, "purged", "long gone", at, None, None),
    ]
    return tasks, alerts


def _sqlite_at_18(url: str) -> None:
    with closing(sqlite3.connect(path_from_url(url))) as conn:
        conn.execute(
            "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT, applied_at REAL)"
        )
        for version, name, sql in migrations("sqlite"):
            if version >= BEFORE:
                break
            for statement in statements(sql):
                conn.execute(statement)
            conn.execute("INSERT INTO schema_migrations VALUES (?, ?, 0)", (version, name))
        tasks, alerts = _rows(T0.timestamp())
        conn.executemany(_TASK, tasks)
        conn.executemany(_ALERT, alerts)
        conn.commit()


async def _postgres_at_18(url: str) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(
            "CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, "
            "applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for version, name, sql in migrations("postgres"):
            if version >= BEFORE:
                break
            await conn.execute(sql.encode())
            await conn.execute(
                "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (version, name)
            )
        tasks, alerts = _rows(T0)
        async with conn.cursor() as cursor:
            await cursor.executemany(_TASK.replace("?", "%s"), tasks)
            await cursor.executemany(_ALERT.replace("?", "%s"), alerts)


async def _flagged(backend: Backend, url: str) -> set[str]:
    query = "SELECT id FROM tasks WHERE alerted"
    if backend.name == "sqlite":
        with closing(sqlite3.connect(path_from_url(url))) as conn:
            return {row[0] for row in conn.execute(query)}
    async with await psycopg.AsyncConnection.connect(url) as conn:
        return {row[0] for row in await (await conn.execute(query)).fetchall()}


async def test_migrating_resolves_the_alerts_of_ended_tasks_and_keeps_one_open_per_task(
    request: pytest.FixtureRequest, backend: Backend, tmp_path: Path, fake_clock: FakeClock
) -> None:
    if backend.name == "sqlite":
        url = await backend.create(tmp_path)
        _sqlite_at_18(url)
    else:
        url = request.getfixturevalue("make_postgres_url")(empty=True)
        await _postgres_at_18(url)
    store = backend.connect(url, fake_clock)
    await store.open()
    try:
        alerts = {a.id: a for a in await store.list_alerts()}
        unsent = [a.id for a in await store.unsent_resolutions()]
        flagged = await _flagged(backend, url)
    finally:
        await store.close()

    assert [(alerts[i].state, alerts[i].resolved_by) for i in (1, 2)] == [
        (AlertState.RESOLVED, "task processed"),
        (AlertState.RESOLVED, "task processed"),
    ]
    assert alerts[1].resolved_at == T0  # when its task ended
    assert (alerts[3].state, alerts[3].acknowledged_by) == (AlertState.ACKNOWLEDGED, "anna")
    assert (alerts[4].state, alerts[4].resolved_by) == (AlertState.RESOLVED, "merged into alert 5")
    kept = alerts[5]
    assert (kept.state, kept.times_raised, kept.reason) == (AlertState.OPEN, 2, "third")
    assert (kept.raised_at, kept.last_raised_at) == (T0, T0)
    assert (alerts[6].state, alerts[6].resolved_by) == (
        AlertState.RESOLVED,
        "task ended (deleted by retention since)",
    )
    # The sinks are told of the resolutions of ended tasks; a merged alert is no news.
    assert unsent == [1, 2, 6]
    assert flagged == {"failing"}
