"""Opening the SQLite file: its URL, the connection's settings, migrations, rollbacks.

A store opened without migrating first reads the file on a read-only
connection (`inspect`), which changes nothing in it, and then opens it with
`mode=rw`, which never creates a missing file.

The connection runs in autocommit mode (`isolation_level=None`): the store
begins and ends every transaction itself, with BEGIN IMMEDIATE, so a writer
takes the database's write lock before it reads what it will change.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Sequence
from urllib.parse import quote

from shepherd.errors import StoreUnavailableError
from shepherd.store.migrations import (
    VERSION_COLUMNS,
    Found,
    Migration,
    migrations,
    pending,
    statements,
)

__all__ = [
    "JOURNAL_SIZE_LIMIT",
    "connect",
    "file_uri",
    "inspect",
    "migrate",
    "path_from_url",
    "rollback",
]

log = logging.getLogger("shepherd.store.sqlite")

#: Bytes the WAL file is cut back to once a checkpoint has emptied it.
JOURNAL_SIZE_LIMIT = 64 * 1024 * 1024

_VERSION_TABLE = (
    "CREATE TABLE IF NOT EXISTS schema_migrations "
    "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
)
_APPLIED = "SELECT version FROM schema_migrations"
_RECORD = "INSERT INTO schema_migrations VALUES (?, ?, ?)"


def path_from_url(url: str) -> str:
    """The file path of `sqlite:///relative.db` or `sqlite:////abs/path.db`."""
    if not url.startswith("sqlite://"):
        raise StoreUnavailableError(f"not a SQLite URL: {url!r}")
    path = url[len("sqlite://") :]
    if path.startswith("/"):
        path = path[1:]
    if not path:
        raise StoreUnavailableError(f"SQLite URL names no file: {url!r}")
    return path


def file_uri(path: str, mode: str) -> str:
    """The `file:` URI of `path` opened in `mode` (`ro`: read only; `rw`: never created)."""
    return f"file:{quote(os.path.abspath(path))}?mode={mode}"


def inspect(path: str, *, busy_timeout: float) -> Found:
    """What the existing file at `path` holds, read on a read-only connection.

    Nothing is written to the file: no journal mode is set, no table created,
    and a read-only connection never checkpoints a WAL into it when it closes.

    Raises:
        sqlite3.Error: The file cannot be read, or is not an SQLite database.
    """
    conn = sqlite3.connect(file_uri(path, "ro"), uri=True, timeout=busy_timeout)
    try:
        tables = tuple(
            sorted(
                name
                for (name,) in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' "
                    "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
                )
            )
        )
        if "schema_migrations" not in tables:
            return Found(tables, None)
        columns = {row[1] for row in conn.execute("PRAGMA table_info(schema_migrations)")}
        if not columns >= VERSION_COLUMNS:
            return Found(tables, None)
        applied: dict[int, str] = {}
        for version, name in conn.execute("SELECT version, name FROM schema_migrations"):
            if not isinstance(version, int) or not isinstance(name, str):
                return Found(tables, None)
            applied[version] = name
        return Found(tables, applied)
    finally:
        conn.close()


def connect(
    path: str,
    *,
    busy_timeout: float,
    synchronous: str,
    applied_at: float,
    migrate_schema: bool = True,
) -> sqlite3.Connection:
    """A connection to the file at `path` in WAL mode, its migrations applied.

    Its rows are `sqlite3.Row`s, read by column name.

    Args:
        path: The database file (created if missing, unless `migrate_schema` is False).
        busy_timeout: Seconds to wait for another connection's lock.
        synchronous: `PRAGMA synchronous` (`FULL` or `NORMAL`).
        applied_at: The instant (unix seconds) recorded for migrations applied now.
        migrate_schema: False to open an existing file as it is: no file is
            created and no migration applied (the caller checked the schema).

    Raises:
        sqlite3.Error: The file cannot be opened or migrated (the store translates it).
    """
    target = path if migrate_schema else file_uri(path, "rw")
    conn = sqlite3.connect(
        target,
        isolation_level=None,
        timeout=busy_timeout,
        check_same_thread=False,
        uri=not migrate_schema,
    )
    conn.row_factory = sqlite3.Row
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        conn.execute(f"PRAGMA journal_size_limit = {JOURNAL_SIZE_LIMIT}")
        if migrate_schema:
            migrate(conn, applied_at=applied_at)
    except BaseException:
        conn.close()
        raise
    return conn


def migrate(
    conn: sqlite3.Connection, *, applied_at: float, available: Sequence[Migration] | None = None
) -> list[int]:
    """Apply pending migrations in one transaction; return the versions applied.

    BEGIN IMMEDIATE takes the write lock first, so processes opening the file
    at once wait for each other and each migration runs exactly once. Each
    file runs statement by statement (`shepherd.store.migrations.statements`).

    Args:
        conn: An autocommit connection, outside any transaction.
        applied_at: The instant (unix seconds) recorded with each migration.
        available: The migrations to consider (default: the SQLite files).
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(_VERSION_TABLE)
        done = {version for (version,) in conn.execute(_APPLIED)}
        found = migrations("sqlite") if available is None else available
        applied = []
        for version, name, sql in pending(found, done):
            for statement in statements(sql):
                conn.execute(statement)
            conn.execute(_RECORD, (version, name, applied_at))
            applied.append(version)
        conn.execute("COMMIT")
    except BaseException:
        rollback(conn)
        raise
    return applied


def rollback(conn: sqlite3.Connection) -> None:
    """End a failed transaction without hiding why it failed.

    SQLite rolls some transactions back by itself (a full disk, an I/O error);
    a ROLLBACK then fails with "no transaction is active". Nor may a ROLLBACK
    that fails for its own reason replace the error that is being raised.
    """
    if not conn.in_transaction:
        return
    try:
        conn.execute("ROLLBACK")
    except sqlite3.Error as exc:
        log.warning("SQLite store: ROLLBACK after a failed transaction failed too: %s", exc)
