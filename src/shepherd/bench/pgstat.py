"""Database transactions on PostgreSQL: `pg_stat_database.xact_commit` deltas.

PostgreSQL counts every committed transaction, reads included, per database.
A backend reports its counts lazily (at most once a second while busy, up to
10 s later when idle), but always when it exits. So the harness closes every
store connection before it reads the counter, and reads it on its own
connection to *another* database (`postgres`, else `template1`) so that its
own reads never count. It then polls until no backend is connected to the
bench database and the counter has stopped moving.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import psycopg

_READ = "SELECT xact_commit, xact_rollback, numbackends FROM pg_stat_database WHERE datname = %s"


def is_postgres(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


class XactCounter:
    """Reads `xact_commit` of the store's database, once every store connection is gone."""

    def __init__(self, url: str) -> None:
        # Imported here: a SQLite-only install (the demo's) has no psycopg, and
        # `shepherd bench` on SQLite must not need it.
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        self.url = url
        self.dbname = str(conninfo_to_dict(url).get("dbname") or "")
        self._monitors = [make_conninfo(url, dbname=db) for db in ("postgres", "template1")]

    async def _connect(self) -> psycopg.AsyncConnection[tuple[object, ...]]:
        import psycopg

        last: Exception | None = None
        for conninfo in self._monitors:
            try:
                return await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
            except psycopg.Error as exc:
                last = exc
        raise RuntimeError(f"cannot open a monitoring connection: {last}")

    async def read(self, *, settle: float = 0.5, deadline: float = 20.0) -> int:
        """`xact_commit` once nobody is connected to the database and it has settled.

        Polls every 50 ms; settled means unchanged for `settle` s with no
        backend connected. Gives the last value at `deadline` s.
        """
        conn = await self._connect()
        try:
            give_up = time.monotonic() + deadline
            last: int | None = None
            since = time.monotonic()
            while True:
                await conn.execute("SELECT pg_stat_clear_snapshot()")
                cur = await conn.execute(_READ, (self.dbname,))
                row = await cur.fetchone()
                if row is None:
                    raise RuntimeError(f"no pg_stat_database row for {self.dbname!r}")
                commits: int = int(str(row[0]))
                backends = int(str(row[2]))
                now = time.monotonic()
                if commits != last or backends:
                    last, since = commits, now
                elif now - since >= settle:
                    return commits
                if now >= give_up:
                    return commits
                await asyncio.sleep(0.05)
        finally:
            await conn.close()


__all__ = ["XactCounter", "is_postgres"]
