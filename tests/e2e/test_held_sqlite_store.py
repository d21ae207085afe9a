"""A SQLite worker whose writes cannot go through names `store_timeout`, and works again after.

A `shepherd run` worker shares its SQLite file with the test. Mid-run the test
holds the write for three times `store_timeout`, one of two ways:

- a connection that is not shepherd's holds `BEGIN IMMEDIATE` (SQLite's own
  lock: the worker's writes wait in the busy handler);
- another process holds the writers' turn (the `flock` beside the file, as a
  shepherd process stopped mid-commit would).

Each of the worker's waits ends after `store_timeout`: before the hold ends,
the worker logs a line naming `store_timeout`; once it ends, every task ends
`processed` and the worker takes new work. Observations are polls with
deadlines; nothing asserts how long anything took.
"""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from typing import TYPE_CHECKING

import pytest

from shepherd.store.sqlite.write_lock import lock_path
from support.fault_app import build_app
from support.fault_run import FaultRun, SQLiteObserver
from support.processes import workers

if TYPE_CHECKING:
    from pathlib import Path

    from support.processes import Worker

STORE_TIMEOUT = 1.0
TASKS = 150
AFTER = 50
NAMES_TIMEOUT = "store_timeout"

_HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_CREAT, 0o666)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()
"""


@contextmanager
def lock_held(db: Path) -> Iterator[None]:
    """A connection that is not shepherd's holds SQLite's write lock."""
    with closing(sqlite3.connect(db, isolation_level=None, timeout=30)) as foreign:
        foreign.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            foreign.execute("ROLLBACK")


@contextmanager
def turn_held(db: Path) -> Iterator[None]:
    """Another process holds the writers' turn until it is killed."""
    with subprocess.Popen(
        [sys.executable, "-c", _HOLDER, lock_path(str(db))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        try:
            assert holder.stdout is not None
            assert holder.stdout.readline().strip() == "held"
            yield
        finally:
            holder.kill()
            holder.wait(timeout=30)


HOLDS = {"sqlite-lock": lock_held, "writers-turn": turn_held}


def stderr_lines(worker: Worker, text: str) -> list[str]:
    return [line for line in worker.stderr(10**7).splitlines() if text in line]


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize("hold", sorted(HOLDS))
async def test_a_held_sqlite_store_is_named_by_store_timeout_and_the_worker_works_after(
    tmp_path: Path, hold: str
) -> None:
    db = tmp_path / "held.db"
    url = f"sqlite:///{db}"
    async with build_app(url) as app:
        await app.open()
        with workers() as running:
            run = FaultRun(
                fault=f"{hold} held for 3 x store_timeout ({3 * STORE_TIMEOUT:g} s)",
                app=app,
                observer=SQLiteObserver(db),
                store_url=url,
                workdir=tmp_path,
                running=running,
                worker_env={"SHEPHERD_STORE_TIMEOUT": str(STORE_TIMEOUT)},
            )
            (worker,) = await run.start_workers(["worker"])
            await run.submit(TASKS)
            await run.wait_progress(0.3)
            await run.fault_starts()
            with HOLDS[hold](db):
                ends = time.monotonic() + 3 * STORE_TIMEOUT
                while not (named := stderr_lines(worker, NAMES_TIMEOUT)):
                    if time.monotonic() >= ends:
                        break
                    await asyncio.sleep(0.1)
                await asyncio.sleep(max(0.0, ends - time.monotonic()))  # the hold's length
            run.fault_ends()
            assert named, (
                f"the worker logged no line naming {NAMES_TIMEOUT} while the store was held"
                f"{run.report_tail()}{run.describe_workers()}"
            )
            run.notes.append(f"first line naming {NAMES_TIMEOUT}: {named[0]}")
            await run.wait_done()
            fresh = await run.submit(AFTER, tag="after")
            await run.wait_done(timed=False)
            claims = await run.claims_by_pid(fresh)
            assert claims.get(worker.pid, 0) == AFTER, dict(claims)
            await run.verify()
