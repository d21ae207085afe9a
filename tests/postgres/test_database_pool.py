"""The tests' pool of ready databases hands out each one as a fresh clone would be.

`support.postgres.DatabasePool` reuses a test's database for a later test:
emptied, under a new name, cut off from whatever still held it. These tests
use a pool of their own on the session's template, synchronously (the sessions'
pool resets in the background; `acquire` waits for it the same way).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from support.postgres import DatabasePool, database_url

pytestmark = pytest.mark.postgres


@pytest.fixture
def pool(postgres_server: str, postgres_template: str) -> Iterator[DatabasePool]:
    # No spare: the database a test gives back is the one it gets next.
    made = DatabasePool(postgres_server, postgres_template, spare=False)
    try:
        yield made
    finally:
        made.close()


_TASKS = (
    "INSERT INTO tasks (id, workflow, input, process_state, complete_within, not_before, "
    "created_at, updated_at) "
    "SELECT 't' || i, 'w', 'null', 'pending', 60, now(), now(), now() "
    "FROM generate_series(1, {count}) i"
)
_ALERT = (
    "INSERT INTO alerts (task_id, workflow, reason, failure_count, raised_at) "
    "VALUES ('t1', 'w', 'r', 1, now())"
)


def _rows(url: str, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        cursor = conn.execute(query, params)
        return cursor.fetchall() if cursor.description else []


def _exists(server: str, name: str) -> bool:
    return bool(_rows(server, "SELECT 1 FROM pg_database WHERE datname = %s", (name,)))


def _round(pool: DatabasePool, name: str) -> str:
    """Give `name` back and take the database the pool hands out next (the same one)."""
    pool.release(name)
    return pool.acquire()


def test_a_database_comes_back_empty_under_a_new_name(
    pool: DatabasePool, postgres_server: str
) -> None:
    name = pool.acquire()
    url = database_url(postgres_server, name)
    template_migrations = _rows(url, "SELECT version FROM schema_migrations ORDER BY 1")
    _rows(
        url,
        _TASKS.format(count=3),
    )
    _rows(url, _ALERT)
    first_alert = _rows(url, "SELECT id FROM alerts")

    again = _round(pool, name)
    assert again != name
    assert not _exists(postgres_server, name)
    url = database_url(postgres_server, again)
    assert _rows(url, "SELECT count(*) FROM tasks") == [(0,)]
    assert _rows(url, "SELECT count(*) FROM alerts") == [(0,)]
    # Identities restart, the migrations' own rows stay.
    _rows(url, _ALERT)
    assert _rows(url, "SELECT id FROM alerts") == first_alert
    assert _rows(url, "SELECT version FROM schema_migrations ORDER BY 1") == template_migrations
    assert pool.discarded == 0


def test_planner_statistics_and_table_settings_do_not_outlive_the_test(
    pool: DatabasePool, postgres_server: str
) -> None:
    name = pool.acquire()
    url = database_url(postgres_server, name)
    _rows(
        url,
        _TASKS.format(count=500),
    )
    _rows(url, "ANALYZE tasks")
    url = database_url(postgres_server, _round(pool, name))
    assert _rows(url, "SELECT count(*) FROM pg_stats WHERE tablename = 'tasks'") == [(0,)]
    assert _rows(url, "SELECT reltuples FROM pg_class WHERE relname = 'tasks'") == [(-1,)]
    assert pool.discarded == 0

    _rows(url, "ALTER TABLE tasks SET (autovacuum_enabled = false)")
    url = database_url(postgres_server, _round(pool, url.rsplit("/", 1)[1]))
    # As the migrations left them (0032: room on each page for a claim's touches).
    assert _rows(url, "SELECT reloptions FROM pg_class WHERE relname = 'tasks'") == [
        (["fillfactor=70"],)
    ]
    assert pool.discarded == 1


@pytest.mark.parametrize(
    "change",
    [
        "CREATE TABLE orders (id text PRIMARY KEY)",
        "CREATE INDEX tasks_by_workflow ON tasks (workflow)",
        "ALTER TABLE tasks ADD COLUMN note text",
        "DELETE FROM schema_migrations",
        "ALTER DATABASE {db} SET deadlock_timeout = '10ms'",
    ],
)
def test_a_database_whose_schema_changed_is_dropped_for_a_fresh_clone(
    pool: DatabasePool, postgres_server: str, change: str
) -> None:
    name = pool.acquire()
    url = database_url(postgres_server, name)
    fresh = database_url(postgres_server, pool.acquire())
    before = _rows(fresh, "SELECT count(*) FROM pg_class")
    migrations = _rows(fresh, "SELECT version FROM schema_migrations ORDER BY 1")
    _rows(url, change.format(db=f'"{name}"'))

    again = _round(pool, name)
    assert pool.discarded == 1
    assert not _exists(postgres_server, name)
    url = database_url(postgres_server, again)
    assert _rows(url, "SELECT count(*) FROM pg_class") == before
    assert _rows(url, "SELECT version FROM schema_migrations ORDER BY 1") == migrations
    assert _rows(url, "SELECT setting FROM pg_settings WHERE name = 'deadlock_timeout'") == [
        ("1000",)
    ]
    pool.release(fresh.rsplit("/", 1)[1])


def test_a_connection_left_open_is_cut_off_and_cannot_follow(
    pool: DatabasePool, postgres_server: str
) -> None:
    name = pool.acquire()
    url = database_url(postgres_server, name)
    with psycopg.connect(url, autocommit=True) as left:
        left.execute("SELECT pg_advisory_lock(42)")
        again = _round(pool, name)
        with pytest.raises(psycopg.OperationalError):
            left.execute("SELECT 1")
    # Its URL now names no database: a process left behind cannot reconnect into it.
    with pytest.raises(psycopg.OperationalError, match="does not exist"):
        psycopg.connect(url, connect_timeout=5)
    taken = _rows(database_url(postgres_server, again), "SELECT pg_try_advisory_lock(42)")
    assert taken == [(True,)]
    assert pool.discarded == 0  # cut off and reused, not dropped
