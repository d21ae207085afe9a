"""The migration runner: which migrations to apply, and how a script splits into statements."""

from __future__ import annotations

import sqlite3
from contextlib import closing

import pytest

from shepherd.errors import NotAStoreError, StoreNotFoundError, StoreTooNewError, StoreTooOldError
from shepherd.store.migrations import (
    Found,
    Migration,
    check_current,
    migrations,
    pending,
    statements,
)
from shepherd.store.sqlite.connection import migrate


def test_pending_keeps_the_unapplied_ones_in_version_order() -> None:
    available = [Migration(3, "0003_c.sql", "c"), Migration(1, "0001_a.sql", "a")]
    available.append(Migration(2, "0002_b.sql", "b"))

    assert [m.version for m in pending(available, {2})] == [1, 3]
    assert pending(available, {1, 2, 3}) == []
    assert [m.version for m in pending(available, set())] == [1, 2, 3]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_shipped_migrations_are_numbered_once_each_in_order(backend: str) -> None:
    found = migrations(backend)

    versions = [m.version for m in found]
    assert versions, f"no {backend} migrations"
    assert versions == sorted(set(versions))
    assert all(m.name.startswith(f"{m.version:04d}_") for m in found)


def test_statements_split_at_each_ending_semicolon() -> None:
    script = "CREATE TABLE a (x);\nCREATE INDEX a_x ON a (x);  INSERT INTO a VALUES (1);\n"

    assert statements(script) == [
        "CREATE TABLE a (x);",
        "CREATE INDEX a_x ON a (x);",
        "INSERT INTO a VALUES (1);",
    ]


def test_a_semicolon_in_a_string_literal_or_a_quoted_name_does_not_split() -> None:
    script = "INSERT INTO a VALUES ('one; two', 'it''s; fine');\nCREATE TABLE \"b;c\" (x);"

    assert statements(script) == [
        "INSERT INTO a VALUES ('one; two', 'it''s; fine');",
        'CREATE TABLE "b;c" (x);',
    ]


def test_a_trigger_body_is_one_statement() -> None:
    trigger = (
        "CREATE TRIGGER a_log AFTER INSERT ON a BEGIN\n"
        "    INSERT INTO log VALUES (new.x);\n"
        "    UPDATE counts SET n = n + 1;\n"
        "END;"
    )

    assert statements(f"CREATE TABLE log (x);\n{trigger}\nDROP TABLE old;") == [
        "CREATE TABLE log (x);",
        trigger,
        "DROP TABLE old;",
    ]


def test_comments_neither_split_nor_count_as_statements() -> None:
    script = (
        "-- a header; with a semicolon\n"
        "CREATE TABLE a (\n"
        "    x INTEGER, -- the x; not a statement\n"
        "    /* a block; comment */ y TEXT\n"
        ");\n"
        "-- a trailing comment;\n"
    )

    (only,) = statements(script)
    assert only.startswith("-- a header; with a semicolon\nCREATE TABLE a (")
    assert only.endswith("y TEXT\n);")


def test_the_last_statement_needs_no_semicolon_and_empty_ones_are_dropped() -> None:
    assert statements("CREATE TABLE a (x);;\n  ;\nINSERT INTO a VALUES (1)\n") == [
        "CREATE TABLE a (x);",
        "INSERT INTO a VALUES (1)",
    ]
    assert statements("") == []
    assert statements("-- nothing here\n\n") == []


def test_sqlite_applies_pending_migrations_once_with_their_triggers_and_literals() -> None:
    first = Migration(
        1,
        "0001_first.sql",
        "CREATE TABLE a (x TEXT);\nCREATE TABLE log (x TEXT);\n"
        "CREATE TRIGGER a_log AFTER INSERT ON a BEGIN\n"
        "    INSERT INTO log VALUES ('saw; ' || new.x);\nEND;\n",
    )
    second = Migration(2, "0002_second.sql", "INSERT INTO a VALUES ('one; two');\n")
    with closing(sqlite3.connect(":memory:", isolation_level=None)) as conn:
        assert migrate(conn, applied_at=1.0, available=[first]) == [1]
        assert migrate(conn, applied_at=2.0, available=[second, first]) == [2]
        assert migrate(conn, applied_at=3.0, available=[first, second]) == []

        assert conn.execute("SELECT x FROM a").fetchall() == [("one; two",)]
        assert conn.execute("SELECT x FROM log").fetchall() == [("saw; one; two",)]
        applied = conn.execute("SELECT version, name, applied_at FROM schema_migrations")
        assert applied.fetchall() == [(1, "0001_first.sql", 1.0), (2, "0002_second.sql", 2.0)]
        assert not conn.in_transaction


def test_a_failing_sqlite_migration_applies_nothing() -> None:
    good = Migration(1, "0001_good.sql", "CREATE TABLE a (x);")
    bad = Migration(2, "0002_bad.sql", "CREATE TABLE b (x);\nINSERT INTO missing VALUES (1);")
    with closing(sqlite3.connect(":memory:", isolation_level=None)) as conn:
        with pytest.raises(sqlite3.OperationalError, match="no such table: missing"):
            migrate(conn, applied_at=1.0, available=[good, bad])

        assert not conn.in_transaction
        tables = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        assert tables == []


# -- check_current: may this code use a store as it is? ------------------------------
_KNOWN = [Migration(1, "0001_a.sql", "a"), Migration(2, "0002_b.sql", "b")]
_WHERE = "SQLite file 'x.db'"


def _check(tables: tuple[str, ...], applied: dict[int, str] | None) -> None:
    check_current(_KNOWN, Found(tables, applied), where=_WHERE, empty="the file")


def test_a_store_at_this_codes_version_is_current() -> None:
    _check(("schema_migrations", "tasks"), {1: "0001_a.sql", 2: "0002_b.sql"})


def test_an_empty_store_is_not_found() -> None:
    with pytest.raises(StoreNotFoundError, match=r"no shepherd store at SQLite file 'x.db'") as err:
        _check((), None)
    assert err.value.where == _WHERE


@pytest.mark.parametrize(
    ("tables", "applied", "says"),
    [
        (("notes",), None, r"holds tables \(notes\) but no shepherd schema"),
        (("tasks",), None, r"holds tables \(tasks\) but no shepherd schema"),
        (tuple(f"t{i}" for i in range(7)), None, r"\(t0, t1, t2, t3, t4, \.\.\.\)"),
        # Another tool's table of the same name: other migrations under version 1, or none.
        (("schema_migrations",), {1: "create_users"}, "no shepherd schema"),
        (("schema_migrations",), {20240101120000: "create_users"}, "no shepherd schema"),
        (("schema_migrations",), {1: "0001_a.sql", 2: "0002_other.sql"}, "not shepherd's"),
    ],
)
def test_a_file_of_something_else_is_not_a_store(
    tables: tuple[str, ...], applied: dict[int, str] | None, says: str
) -> None:
    with pytest.raises(NotAStoreError, match=says):
        _check(tables, applied)


def test_a_store_migrated_by_newer_code_is_too_new() -> None:
    with pytest.raises(StoreTooNewError, match=r"newer shepherd code \(schema version 3; .* 2\)"):
        _check(("schema_migrations",), {1: "0001_a.sql", 2: "0002_b.sql", 3: "0003_c.sql"})


def test_a_store_missing_migrations_is_too_old() -> None:
    with pytest.raises(StoreTooOldError, match=r"schema version 1 and this code needs 2"):
        _check(("schema_migrations",), {1: "0001_a.sql"})
