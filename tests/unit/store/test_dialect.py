"""One SQL text per operation: the dialects' hooks, lists and times, and the plans' driving."""

from __future__ import annotations

import importlib
import pkgutil
import sqlite3
from datetime import UTC, datetime

import pytest

from shepherd.store import sql
from shepherd.store.effect_rows import UPDATE
from shepherd.store.sql.dialect import POSTGRES, SQLITE, Dialect
from shepherd.store.sql.plan import Plan, Query, Rows, changed, one, run

DIALECTS = [SQLITE, POSTGRES]


def _templates() -> list[tuple[str, str | dict[str, str]]]:
    """(where, template) of every statement in store/sql, and the effect UPDATE.

    A template is one text, or one per dialect (a dict by the dialect's name).
    """
    found: list[tuple[str, str | dict[str, str]]] = [("effect_rows.UPDATE", UPDATE)]
    for info in pkgutil.iter_modules(sql.__path__):
        module = importlib.import_module(f"{sql.__name__}.{info.name}")
        for name, value in vars(module).items():
            if name.startswith("__") or not name.startswith("_"):
                continue
            if (isinstance(value, str) and "?" in value) or (
                isinstance(value, dict) and value.keys() == {"sqlite", "postgres"}
            ):
                found.append((f"{info.name}.{name}", value))
    return found


def test_both_dialects_know_the_same_hooks() -> None:
    assert SQLITE.hooks.keys() == POSTGRES.hooks.keys()


@pytest.mark.parametrize("dialect", DIALECTS, ids=lambda d: d.name)
@pytest.mark.parametrize(("where", "template"), _templates(), ids=lambda t: str(t)[:40])
def test_every_template_becomes_text_with_no_hook_left(
    dialect: Dialect, where: str, template: str | dict[str, str]
) -> None:
    if isinstance(template, dict):
        template = template[dialect.name]
    text = dialect.sql(template)
    if "{list}" in text:
        text, _ = dialect.listed(template, ["a", "b"])
    assert "{" not in text, where
    assert "?" not in text if dialect is POSTGRES else "%s" not in text, where


def test_a_template_is_the_backends_text() -> None:
    template = "SELECT 1 FROM t WHERE a = ?{text} AND b > {now} - ?{float}{seconds} AND c LIKE 'x%'"

    assert SQLITE.sql(template) == "SELECT 1 FROM t WHERE a = ? AND b > ? - ? AND c LIKE 'x%'"
    assert POSTGRES.sql(template) == (
        "SELECT 1 FROM t WHERE a = %s::text AND b > coalesce(%s::timestamptz, now()) "
        "- %s::float8 * interval '1 second' AND c LIKE 'x%%'"
    )


def test_a_list_is_marks_on_sqlite_and_one_array_on_postgres() -> None:
    template = "DELETE FROM t WHERE a = ? AND id {list} AND b = ?"

    assert SQLITE.listed(template, ["x", "y"]) == (
        "DELETE FROM t WHERE a = ? AND id IN (?, ?) AND b = ?",
        ["x", "y"],
    )
    assert POSTGRES.listed(template, ["x", "y"], "bigint") == (
        "DELETE FROM t WHERE a = %s AND id = ANY(%s::bigint[]) AND b = %s",
        [["x", "y"]],
    )


def test_sqlite_takes_a_long_list_in_chunks_postgres_whole() -> None:
    items = list(range(1201))

    assert [len(chunk) for chunk in SQLITE.chunks(items)] == [500, 500, 201]
    assert POSTGRES.chunks(items) == [items]
    assert SQLITE.chunks([]) == POSTGRES.chunks([]) == []


def test_each_dialect_has_its_time_type() -> None:
    at = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    stored = SQLITE.stored(at)

    assert SQLITE.instant(SQLITE.later(stored, 1.5)) == POSTGRES.later(at, 1.5)
    assert SQLITE.between(SQLITE.later(stored, 2.0), stored) == 2.0
    assert POSTGRES.between(POSTGRES.later(at, 2.0), at) == 2.0
    assert POSTGRES.stored(at) is at
    assert (SQLITE.limit(-1), POSTGRES.limit(-1), POSTGRES.limit(5)) == (-1, None, 5)


def test_a_plan_reads_what_it_wrote_and_returns_its_outcome() -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")

    def plan() -> Plan[tuple[int, Rows]]:
        count = yield [changed("INSERT INTO t (v) VALUES (?)", [("a",), ("b",)])]
        rows = yield from one("SELECT v FROM t ORDER BY id")
        return count[0][0][0], rows

    def execute(query: Query) -> Rows:
        if query.many:
            return [(conn.executemany(query.sql, query.params).rowcount,)]
        return conn.execute(query.sql, query.params).fetchall()

    assert run(plan(), execute) == (2, [("a",), ("b",)])
