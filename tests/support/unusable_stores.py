"""Stores a command that never creates or migrates must refuse, and proof that it left them alone.

`prepare(kind, url)` turns an empty place (a SQLite path where no file is yet,
or an empty PostgreSQL database) into one of the `KINDS`: no store at all,
another application's data, a file or database with its own `tasks` table, a
store migrated by newer code (its latest `schema_migrations` row renumbered
past this code's), or one that misses this code's latest migration.
`fingerprint(url)` is what must not change: the SQLite file's sha256 (or
its absence), or a PostgreSQL database's tables, columns and rows.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from contextlib import closing
from dataclasses import dataclass

import psycopg

from shepherd.errors import (
    NotAStoreError,
    StoreNotFoundError,
    StoreTooNewError,
    StoreTooOldError,
    UnusableStoreError,
)
from shepherd.store import open_store
from shepherd.store.migrations import migrations, statements
from shepherd.store.sqlite import path_from_url

__all__ = ["KINDS", "Unusable", "execute", "fingerprint", "prepare"]


@dataclass(frozen=True, slots=True)
class Unusable:
    """One kind of unusable store: the error it gets, and words its message holds."""

    kind: str
    error: type[UnusableStoreError]
    says: str


#: Every kind, by name. `missing` exists on SQLite only (a database is always there).
KINDS = {
    u.kind: u
    for u in (
        Unusable("missing", StoreNotFoundError, "the file does not exist"),
        Unusable("empty", StoreNotFoundError, "is empty"),
        Unusable("foreign", NotAStoreError, "is not a shepherd store: it holds tables (notes)"),
        Unusable("own_tasks", NotAStoreError, "is not a shepherd store: it holds tables (tasks)"),
        Unusable("too_new", StoreTooNewError, "was migrated by newer shepherd code"),
        Unusable("too_old", StoreTooOldError, "this code needs"),
    )
}

_LATEST = "(SELECT max(version) FROM schema_migrations)"
_SETUP = {
    "foreign": (
        "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL)",
        "INSERT INTO notes (id, body) VALUES (1, 'not shepherd''s')",
    ),
    "own_tasks": (
        "CREATE TABLE tasks (id TEXT PRIMARY KEY, title TEXT NOT NULL)",
        "INSERT INTO tasks (id, title) VALUES ('t1', 'water the plants')",
    ),
    "too_new": (
        f"UPDATE schema_migrations SET version = 9999, name = '9999_future.sql' "
        f"WHERE version = {_LATEST}",
    ),
}


def _is_sqlite(url: str) -> bool:
    return url.startswith("sqlite://")


def execute(url: str, statements: tuple[str, ...]) -> None:
    """Run `statements` on the store at `url` and commit (straight through its driver)."""
    if _is_sqlite(url):
        with closing(sqlite3.connect(path_from_url(url))) as conn:
            for statement in statements:
                conn.execute(statement)
            conn.commit()
        return
    with psycopg.connect(url, autocommit=True) as pg:
        for statement in statements:
            pg.execute(statement.encode())


async def prepare(kind: str, url: str) -> None:
    """Make the empty place at `url` a store of `kind` (see the module docstring)."""
    if kind == "missing":
        assert _is_sqlite(url), "a PostgreSQL database cannot be missing here"
        return
    if kind == "empty":
        if _is_sqlite(url):
            open(path_from_url(url), "wb").close()  # noqa: ASYNC230 - an empty file, once
        return
    if kind == "too_old":
        migrate_all_but_the_last(url)
        return
    if kind == "too_new":
        store = open_store(url)
        await store.open()  # migrated by this code
        await store.close()
    execute(url, _SETUP[kind])


def migrate_all_but_the_last(url: str) -> None:
    """Make the empty place at `url` a store migrated by older code: every migration but the last."""
    backend = "sqlite" if _is_sqlite(url) else "postgres"
    *older, _ = migrations(backend)
    if _is_sqlite(url):
        with closing(sqlite3.connect(path_from_url(url))) as conn:
            conn.execute(
                "CREATE TABLE schema_migrations "
                "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
            )
            for version, name, sql in older:
                for statement in statements(sql):
                    conn.execute(statement)
                conn.execute("INSERT INTO schema_migrations VALUES (?, ?, 0)", (version, name))
            conn.commit()
        return
    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute(
            "CREATE TABLE schema_migrations (version integer PRIMARY KEY, "
            "name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for version, name, sql in older:
            pg.execute(sql.encode())
            pg.execute(
                "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (version, name)
            )


def fingerprint(url: str) -> str:
    """What a command that must change nothing must leave as it was at `url`."""
    if _is_sqlite(url):
        path = path_from_url(url)
        if not os.path.exists(path):
            return "no file"
        with open(path, "rb") as file:
            return hashlib.sha256(file.read()).hexdigest()
    with psycopg.connect(url, autocommit=True) as pg:
        columns = pg.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = 'public' ORDER BY 1, 2"
        ).fetchall()
        tables = sorted({str(table) for table, _, _ in columns})
        rows = {
            table: sorted(map(repr, pg.execute(f'SELECT * FROM "{table}"').fetchall()))
            for table in tables
        }
    return hashlib.sha256(repr((columns, rows)).encode()).hexdigest()
