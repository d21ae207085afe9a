"""Column lists read by name: each position names a real column, in the order it is selected."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime
from typing import Any, ClassVar

import pytest

from shepherd.core.records import Lease, Task
from shepherd.core.states import ProcessState
from shepherd.store import breaker_rows, rows, step_writes, worker_rows
from shepherd.store.postgres import steps as postgres_steps
from shepherd.store.rows import Columns, Records, TaskCol, unix_instant
from shepherd.store.sqlite import steps as sqlite_steps
from shepherd.store.sqlite.connection import migrate
from shepherd.store.sqlite.rows import tuples

#: Each shared column list, with the table it is selected from.
TABLES: list[tuple[type[Columns], str]] = [
    (rows.TaskCol, "tasks"),
    (rows.StepCol, "steps"),
    (rows.RequestCol, "requests"),
    (rows.EventCol, "events"),
    (rows.LeaseCol, "leases"),
    (rows.TombstoneCol, "tombstones"),
    (rows.OwnerCol, "tasks"),
    (worker_rows.WorkerCol, "workers"),
    (breaker_rows.BreakerCol, "breakers"),
    (breaker_rows.BreakerEventCol, "breaker_events"),
]


@pytest.fixture
def conn() -> Iterator[sqlite3.Connection]:
    with closing(sqlite3.connect(":memory:", isolation_level=None)) as connection:
        migrate(connection, applied_at=0.0)
        yield connection


def test_a_column_stands_at_the_position_it_is_declared_in() -> None:
    class Sample(Columns):
        FIRST: ClassVar[int]
        SECOND_ONE: ClassVar[int]
        THIRD: ClassVar[int]

    assert (Sample.FIRST, Sample.SECOND_ONE, Sample.THIRD) == (0, 1, 2)
    assert Sample.names() == ("first", "second_one", "third")
    assert Sample.select() == "first, second_one, third"
    assert Sample.select("x") == "x.first, x.second_one, x.third"


def test_a_column_list_without_upper_case_declarations_is_refused() -> None:
    with pytest.raises(TypeError, match="Odd: declare each column as NAME"):

        class Odd(Columns):
            lower: ClassVar[int]

    with pytest.raises(TypeError, match="Empty: declare each column"):

        class Empty(Columns):
            pass


@pytest.mark.parametrize(("columns", "table"), TABLES, ids=[c.__name__ for c, _ in TABLES])
def test_each_column_list_selects_its_names_in_order(
    conn: sqlite3.Connection, columns: type[Columns], table: str
) -> None:
    cursor = conn.execute(f"SELECT {columns.select()} FROM {table}")

    assert tuple(d[0] for d in cursor.description) == columns.names()
    assert [getattr(columns, name.upper()) for name in columns.names()] == list(
        range(len(columns.names()))
    )


def test_the_reply_join_selects_the_reply_columns_in_order(conn: sqlite3.Connection) -> None:
    cursor = conn.execute(sqlite_steps._REPLIES, ("s/1", 10))

    assert tuple(d[0] for d in cursor.description) == step_writes.ReplyCol.names()
    assert step_writes.REPLY_COLUMNS in postgres_steps._TAKE_REPLIES


def test_a_task_row_becomes_its_record_column_by_column(conn: sqlite3.Connection) -> None:
    conn.execute(
        "INSERT INTO tasks (id, workflow, key, input, process_state, locked_by, lock_epoch, "
        "complete_by, complete_within, failure_count, not_before, reply_to, created_at, "
        "updated_at, crashes, owner_deaths) VALUES ('t1', 'w', 'k', '{\"n\": 1}', 'processing', "
        "'s/1', 3, 40.0, 2.0, 1, 10.0, 'inbox', 5.0, 6.0, '[\"h:1\"]', 2)"
    )
    row = tuples(conn).execute(f"SELECT {rows.TASK_COLUMNS} FROM tasks").fetchone()

    def at(seconds: float) -> datetime:
        return datetime.fromtimestamp(seconds, UTC)

    assert row[TaskCol.NOT_BEFORE] == 10.0
    assert Records(unix_instant).task(row) == Task(
        id="t1",
        workflow="w",
        key="k",
        input={"n": 1},
        process_state=ProcessState.PROCESSING,
        locked_by="s/1",
        lock_epoch=3,
        complete_by=at(40.0),
        failure_count=1,
        not_before=at(10.0),
        reply_to="inbox",
        created_at=at(5.0),
        updated_at=at(6.0),
        crashes=("h:1",),
        owner_deaths=2,
    )


def test_records_turn_instants_with_the_backend_instant() -> None:
    seen: list[Any] = []

    def instant(value: Any) -> datetime:
        seen.append(value)
        return datetime(2030, 1, 1, tzinfo=UTC)

    lease = Records(instant).lease(("supervisor", "h:1", 4, "the expiry"))

    assert lease == Lease(
        name="supervisor", holder="h:1", epoch=4, expires_at=datetime(2030, 1, 1, tzinfo=UTC)
    )
    assert seen == ["the expiry"]
