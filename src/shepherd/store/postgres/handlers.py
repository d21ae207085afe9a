"""Which function runs each store operation on PostgreSQL: one table for writes, one for reads.

Each handler module files its handlers with `@WRITES.handles(Op)` or
`@READS.handles(Op)` (`shepherd.store.dispatch`); importing this module
imports them all, so the tables are complete. A write handler gets every
operation of its type in the batch and returns one outcome per operation, in
order (a value, or an exception for that caller alone).
"""

from __future__ import annotations

from shepherd.store.postgres import (  # noqa: F401 - imported to file their handlers
    breakers,
    crashes,
    keys,
    leases,
    operator,
    queues,
    retention,
    steps,
    tasks,
    workers,
)
from shepherd.store.postgres.batch import WRITES
from shepherd.store.postgres.reader import READS

__all__ = ["READS", "WRITES"]
