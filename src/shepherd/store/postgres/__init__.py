"""The PostgreSQL state store, for many processes on many machines.

`store` holds the `PostgresStore` (life cycle, reads, group commit); the batch
handlers live by concern in `tasks`, `steps`, `queues`, `leases` and
`operator`; `listener` turns NOTIFYs into local wake-ups; `connection` builds
connection strings and applies migrations.
"""

from __future__ import annotations

from shepherd.store.postgres.store import PostgresStore as PostgresStore

__all__ = ["PostgresStore"]
