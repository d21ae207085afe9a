"""Versioned schema migrations for both backends: which to apply, and their statements.

Each backend keeps numbered files, `NNNN_name.sql`, in its folder here
(`sqlite/`, `postgres/`). Opening a store applies, in one transaction, every
migration its `schema_migrations` table does not list yet, in version order,
and lists it there. This module decides what to apply and how a script splits
into statements; each backend's executor (`migrate` in its `connection`
module) only runs them: SQLite one statement at a time (`statements`),
PostgreSQL a whole file as one batch.

A store opened without migrating (the operator's commands) is read first, by
a backend's `inspect`, into a `Found`; `check_current` then decides whether
this code may use it as it is, and raises the UnusableStoreError that says why
not.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Iterable, Sequence
from importlib import resources
from typing import NamedTuple

from shepherd.errors import NotAStoreError, StoreNotFoundError, StoreTooNewError, StoreTooOldError

__all__ = ["Found", "Migration", "check_current", "migrations", "pending", "statements"]

#: The columns shepherd's `schema_migrations` table has (another tool's may share its name).
VERSION_COLUMNS = frozenset({"version", "name", "applied_at"})
#: How many of a foreign store's tables a message names.
_NAMED_TABLES = 5


class Migration(NamedTuple):
    """One migration file.

    Attributes:
        version: The number its name starts with (`0003_workers.sql` is 3).
        name: The file's name.
        sql: The file's text: one or more statements, each ended by `;`.
    """

    version: int
    name: str
    sql: str


def migrations(backend: str) -> list[Migration]:
    """Every migration of `backend` (`sqlite` or `postgres`), in version order."""
    folder = resources.files(__package__).joinpath(backend)
    found = []
    for entry in folder.iterdir():
        name = entry.name
        if name.endswith(".sql") and name[:4].isdigit():
            found.append(Migration(int(name[:4]), name, entry.read_text(encoding="utf-8")))
    return sorted(found)


def pending(available: Iterable[Migration], applied: Collection[int]) -> list[Migration]:
    """The migrations of `available` whose versions are not in `applied`, in version order."""
    return sorted(m for m in available if m.version not in applied)


class Found(NamedTuple):
    """What a store holds, as read without changing it.

    Attributes:
        tables: The names of its tables, sorted.
        applied: Its `schema_migrations` rows, version -> file name, when that
            table exists with shepherd's columns; None otherwise.
    """

    tables: tuple[str, ...]
    applied: dict[int, str] | None


def check_current(available: Sequence[Migration], found: Found, *, where: str, empty: str) -> None:
    """Refuse a store this code cannot use without changing it.

    Args:
        available: This code's migrations for the store's backend.
        found: What the store holds.
        where: The store, as messages name it (`SQLite file 'x.db'`).
        empty: What an empty store is (`the file`, `the database`).

    Raises:
        StoreNotFoundError: The store holds no table at all.
        NotAStoreError: It holds tables but no shepherd schema (another
            application's file, or one with its own `tasks` table), or a
            `schema_migrations` table that is not shepherd's.
        StoreTooNewError: It lists migrations this code does not know.
        StoreTooOldError: It lacks migrations this code has.
    """
    creates = "`shepherd run`, `shepherd worker` or `shepherd submit` creates one"
    if not found.tables:
        raise StoreNotFoundError(
            f"no shepherd store at {where}: {empty} is empty ({creates})", where=where
        )
    known = {m.version: m.name for m in available}
    applied = found.applied
    first = min(known)
    if applied is None or applied.get(first) != known[first]:
        named = ", ".join(found.tables[:_NAMED_TABLES])
        more = ", ..." if len(found.tables) > _NAMED_TABLES else ""
        raise NotAStoreError(
            f"{where} is not a shepherd store: it holds tables ({named}{more}) "
            "but no shepherd schema; nothing was changed",
            where=where,
        )
    if any(known[v] != name for v, name in applied.items() if v in known):
        raise NotAStoreError(
            f"{where} is not a shepherd store: its schema_migrations table lists "
            "migrations that are not shepherd's; nothing was changed",
            where=where,
        )
    if set(applied) - set(known):
        raise StoreTooNewError(
            f"{where} was migrated by newer shepherd code (schema version {max(applied)}; "
            f"this code knows up to {max(known)}): upgrade shepherd to use it",
            where=where,
        )
    if set(known) - set(applied):
        raise StoreTooOldError(
            f"{where} has schema version {max(applied)} and this code needs {max(known)}: "
            "start `shepherd run` or `shepherd worker` (or open the App), which migrate "
            "it, then try again",
            where=where,
        )


def statements(script: str) -> list[str]:
    """The statements of an SQL script, each whole, without blank or comment-only ones.

    A script splits only at a `;` that ends a complete statement as SQLite
    reads it (`sqlite3.complete_statement`): a `;` inside a string literal, a
    quoted name, a comment or a trigger's `BEGIN ... END` body does not split
    it. Text after the last `;` is a statement too, unless it is blank or
    comments only.
    """
    found: list[str] = []
    start = 0
    end = script.find(";")
    while end != -1:
        candidate = script[start : end + 1]
        if sqlite3.complete_statement(candidate):
            if not _blank(candidate[:-1]):
                found.append(candidate.strip())
            start = end + 1
        end = script.find(";", end + 1)
    if not _blank(script[start:]):
        found.append(script[start:].strip())
    return found


def _blank(text: str) -> bool:
    """Whether `text` holds nothing but white space and `--` comment lines."""
    return all(not line.strip() or line.lstrip().startswith("--") for line in text.splitlines())
