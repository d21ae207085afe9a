"""What the soak reads from outside the engine: the store's size, workers' RSS, server restarts.

The store's size is the SQLite main file plus its write-ahead log, or
`pg_database_size(current_database())` on PostgreSQL (on a connection of its
own, so a server restart only delays the reading). A worker's RSS is the
`VmRSS` line of `/proc/PID/status`.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from pathlib import Path

from shepherd.bench.pgstat import is_postgres

#: Seconds a size reading may keep retrying while the server restarts.
SIZE_PATIENCE = 30.0


@dataclass(frozen=True, slots=True, kw_only=True)
class StoreSize:
    """The store's size at one instant; `wal_bytes` is SQLite's write-ahead log (0 on PostgreSQL)."""

    main_bytes: int
    wal_bytes: int

    @property
    def total_bytes(self) -> int:
        return self.main_bytes + self.wal_bytes


def _sqlite_path(url: str) -> str:
    """The file of `sqlite:///relative.db` or `sqlite:////abs/path.db`, as the store opens it.

    Parsed here rather than imported from the SQLite backend, which only the store
    package may import.
    """
    path = url.removeprefix("sqlite://")
    return path.removeprefix("/")


def _file_size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except FileNotFoundError:
        return 0


async def store_size(url: str) -> StoreSize | None:
    """The store's size now; None when PostgreSQL did not answer within SIZE_PATIENCE s."""
    if not is_postgres(url):
        path = _sqlite_path(url)
        return StoreSize(main_bytes=_file_size(path), wal_bytes=_file_size(path + "-wal"))
    import psycopg

    give_up = time.monotonic() + SIZE_PATIENCE
    while True:
        try:
            async with await psycopg.AsyncConnection.connect(
                url, autocommit=True, connect_timeout=5
            ) as conn:
                cur = await conn.execute("SELECT pg_database_size(current_database())")
                row = await cur.fetchone()
                return StoreSize(main_bytes=int(str(row[0])) if row else 0, wal_bytes=0)
        except psycopg.Error:
            if time.monotonic() >= give_up:
                return None
            await asyncio.sleep(0.5)


def rss_kib(pid: int) -> int | None:
    """The process's resident set size in KiB (`VmRSS`), or None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    for line in text.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class Restart:
    """One run of the restart command: when (s since the soak began), how long, its exit code."""

    at_s: float
    took_s: float
    returncode: int


async def run_restart(command: str, *, log: Path, started: float) -> Restart:
    """Run `command` through the shell, its output appended to `log`.

    The output goes to a file, not a pipe: a server started by the command may
    keep inherited descriptors open for as long as it runs.
    """
    at = time.monotonic()
    with log.open("ab") as out:
        proc = await asyncio.create_subprocess_shell(
            command, stdin=asyncio.subprocess.DEVNULL, stdout=out, stderr=out
        )
        code = await proc.wait()
    return Restart(at_s=at - started, took_s=time.monotonic() - at, returncode=code)


__all__ = ["Restart", "StoreSize", "rss_kib", "run_restart", "store_size"]
