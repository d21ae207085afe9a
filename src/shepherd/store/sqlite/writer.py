"""The group-commit writer: every waiting operation in one transaction, one fsync.

The connection's thread (`thread`) hands over every write waiting at that
moment; the writer runs them on that thread, grouped by kind, in ONE
transaction begun with BEGIN IMMEDIATE, each kind by its handler in
`handlers.WRITES`. If one operation breaks the batch, the batch is rolled back and
each operation runs alone, so only its caller sees the error; a condition of
the whole store (a full disk, a damaged file, a lock held too long) fails the
batch once for every caller instead.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, final

from shepherd.payloads import MAX_PAYLOAD_BYTES
from shepherd.store.sqlite.batch import SqliteBatch
from shepherd.store.sqlite.connection import rollback
from shepherd.store.sqlite.errors import is_store_wide, translate
from shepherd.store.sqlite.handlers import WRITES

if TYPE_CHECKING:
    from shepherd.clock import Clock
    from shepherd.store.ops import Write

__all__ = ["Writer"]


@final
class Writer:
    """Runs batches of operations on the store's connection, one transaction each.

    Args:
        url: The store's URL, for messages.
        clock: The store's clock: each transaction's `now`.
        payload_limit: The most bytes a payload may take as JSON text.
    """

    def __init__(self, url: str, clock: Clock, *, payload_limit: int = MAX_PAYLOAD_BYTES) -> None:
        self.url = url
        self.clock = clock
        self.payload_limit = payload_limit
        self.commits = 0
        self.batches = 0
        self.operations = 0

    def run(
        self, conn: sqlite3.Connection, ops: Sequence[Write[Any]]
    ) -> tuple[list[object], set[str]]:
        """Run `ops` on `conn` (on its thread); return their outcomes and the channels to ring."""
        outcomes, rings = self._transaction(conn, ops)
        self.batches += 1
        self.operations += len(ops)
        return outcomes, rings

    def statistics(self) -> dict[str, float]:
        """Batches run, operations carried, their mean per batch, and commits."""
        return {
            "batches": self.batches,
            "operations": self.operations,
            "ops_per_batch": self.operations / self.batches if self.batches else 0.0,
            "commits": self.commits,
        }

    def _transaction(
        self, conn: sqlite3.Connection, ops: Sequence[Write[Any]]
    ) -> tuple[list[object], set[str]]:
        batch = SqliteBatch(conn, self.clock.now().timestamp(), payload_limit=self.payload_limit)
        grouped: dict[type[Write[Any]], list[int]] = defaultdict(list)
        for index, op in enumerate(ops):
            grouped[type(op)].append(index)
        outcomes: list[object] = [None] * len(ops)
        if conn.in_transaction:  # a rollback that failed earlier: start clean
            rollback(conn)
        conn.execute("BEGIN IMMEDIATE")
        try:
            for kind, indexes in grouped.items():
                results = WRITES[kind](batch, [ops[i] for i in indexes])
                for i, result in zip(indexes, results, strict=True):
                    outcomes[i] = result
            conn.execute("COMMIT")
            self.commits += 1
        except BaseException as exc:
            rollback(conn)
            if len(ops) == 1 or not isinstance(exc, Exception) or is_store_wide(exc):
                # A full disk, a damaged file, a lock: every op would meet it alike.
                raise
            return self._one_by_one(conn, ops)
        return outcomes, batch.rings

    def _one_by_one(
        self, conn: sqlite3.Connection, ops: Sequence[Write[Any]]
    ) -> tuple[list[object], set[str]]:
        """One op broke the batch: run each alone so only that caller sees it."""
        outcomes: list[object] = []
        rings: set[str] = set()
        for index, op in enumerate(ops):
            try:
                single, single_rings = self._transaction(conn, [op])
                outcomes.append(single[0])
                rings |= single_rings
            except Exception as err:
                error = translate(err, self.url)
                if is_store_wide(err):  # the store failed meanwhile: the rest would too
                    outcomes.extend([error] * (len(ops) - index))
                    break
                outcomes.append(error)
        return outcomes, rings
