"""SQLite batch handlers: the shared circuit breakers.

Each handler runs inside the store's group-commit transaction:
`handler(store, conn, items, now, rings)` returns one outcome per item (a value,
or an exception that only that item's caller sees).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shepherd.store.sqlite import SQLiteStore

Handler = Callable[["SQLiteStore", sqlite3.Connection, list[Any], float, set[str]], list[object]]

#: Operation kind -> its batch handler.
HANDLERS: dict[str, Handler] = {}
