"""The embedded SQLite state store: one file, shared by the processes of one host.

`store` holds the `SQLiteStore` (life cycle, reads, the operations' entry
points); `writer` runs the group committer's batches in one transaction each,
handing every kind of operation to its handler, kept by concern in `tasks`,
`steps`, `queues`, `keys`, `breakers`, `leases`, `operator`, `workers`,
`crashes` and `retention`; `connection` opens the file and applies the
migrations; `errors` says what a `sqlite3` error means.
"""

from __future__ import annotations

from shepherd.store.sqlite.connection import JOURNAL_SIZE_LIMIT as JOURNAL_SIZE_LIMIT
from shepherd.store.sqlite.connection import path_from_url as path_from_url
from shepherd.store.sqlite.store import SQLiteStore as SQLiteStore

__all__ = ["JOURNAL_SIZE_LIMIT", "SQLiteStore", "path_from_url"]
