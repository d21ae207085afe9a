"""Versioned schema migrations for both backends: which to apply, and their statements.

Each backend keeps numbered files, `NNNN_name.sql`, in its folder here
(`sqlite/`, `postgres/`). Opening a store applies, in one transaction, every
migration its `schema_migrations` table does not list yet, in version order,
and lists it there. This module decides what to apply and how a script splits
into statements; each backend's executor (`migrate` in its `connection`
module) only runs them: SQLite one statement at a time (`statements`),
PostgreSQL a whole file as one batch.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Iterable
from importlib import resources
from typing import NamedTuple

__all__ = ["Migration", "migrations", "pending", "statements"]


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
