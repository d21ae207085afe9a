"""SQLite store faults: a full disk is waited out; a damaged file is named, not retried.

A full disk: the store file lives on a 16 MiB tmpfs shared by two `shepherd
run` workers. Half-way through the work a ballast file takes every free byte
(taken again if any is freed) for about 20 s, then is deleted, without
restarting anything. The workers stay alive and every task ends processed once
space is back, none charged a failure (the app's workflow has `max_failures=1`:
one charge would end a task in `error`); a submit made while the disk is full
raises a ShepherdError saying the disk is full, never a raw sqlite3 error.

A damaged file: after a clean stop, random bytes are written over a few pages
of the store file. `shepherd run` on it exits non-zero with one stderr line
saying the store is damaged (and how to check it: `PRAGMA integrity_check`),
without a traceback; so does `shepherd tasks`.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import sqlite3
import subprocess
import sys
import time
from typing import TYPE_CHECKING

import pytest

from shepherd import ShepherdError
from support.disk import Ballast, free_bytes, small_tmpfs
from support.fault_app import WORKFLOW, build_app
from support.fault_run import APP_SPEC, TESTS, FaultRun, SQLiteObserver
from support.processes import workers

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = [pytest.mark.faults, pytest.mark.slow]

TASKS = 200
#: The least time the disk stays full.
FULL_FOR = 20.0
#: A probe submit's input: big enough to need new pages, however the WAL is laid out.
PROBE_BYTES = 64 * 1024
#: Seconds a command may take on a damaged store before it counts as hanging.
COMMAND_TIMEOUT = 60.0

_DISK_FULL = re.compile(r"disk.*full|full.*disk|no space", re.IGNORECASE)


@pytest.mark.timeout(200)
@pytest.mark.usefixtures("require_root")
async def test_a_full_disk_is_waited_out(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "disk") as disk:
        store = disk / "store.db"
        url = f"sqlite:///{store}"
        ballast = Ballast(disk / "ballast")
        async with build_app(url) as app:
            with workers() as running:
                run = FaultRun(
                    fault=f"SQLite's disk full for at least {FULL_FOR:.0f} s",
                    app=app,
                    observer=SQLiteObserver(store),
                    store_url=url,
                    workdir=tmp_path,
                    running=running,
                )
                await run.start_workers(["worker-1", "worker-2"])
                await run.submit(TASKS)
                await run.wait_progress(0.5)
                await run.fault_starts()
                refused: BaseException | None = None
                accepted = 0
                full_since = time.monotonic()
                try:
                    filled = await asyncio.to_thread(ballast.fill)
                    run.notes.append(
                        f"ballast: {filled / 2**20:.1f} MiB; free after it: {free_bytes(disk)} bytes"
                    )
                    n = 0
                    while refused is None or time.monotonic() - full_since < FULL_FOR:
                        await asyncio.to_thread(ballast.fill)  # anything freed is taken again
                        if refused is None:
                            try:
                                async with asyncio.timeout(30):
                                    task_id = await app.submit(
                                        WORKFLOW, {"probe": n, "pad": "x" * PROBE_BYTES}
                                    )
                            except Exception as exc:
                                refused = exc
                            else:
                                run.ids.append(task_id)
                                accepted += 1
                            n += 1
                        assert time.monotonic() - full_since < 60, (
                            f"{accepted} submits succeeded in 60 s on a full disk: none was refused"
                            f"{run.report_tail()}"
                        )
                        await asyncio.sleep(0.1)  # the probes' pace, and the fault's duration
                finally:
                    ballast.remove()
                run.fault_ends()
                run.trickled = accepted  # acknowledged around the fault: counted as unfinished
                run.notes.append(
                    f"submits on the full disk: {accepted} acknowledged, then refused with "
                    f"{type(refused).__module__}.{type(refused).__name__}: {refused}"
                )
                assert isinstance(refused, ShepherdError), (
                    f"a submit on a full disk raised {type(refused).__module__}."
                    f"{type(refused).__name__}: {refused!r}, not a ShepherdError{run.report_tail()}"
                )
                assert _DISK_FULL.search(str(refused)), (
                    f"the error does not say the disk is full: {refused}{run.report_tail()}"
                )
                await run.wait_done()
                await run.verify()


def _store_with_tasks(path: Path) -> None:
    async def fill() -> None:
        async with build_app(f"sqlite:///{path}") as app:
            await asyncio.gather(
                *(app.submit(WORKFLOW, {"i": i, "pad": "y" * 300}) for i in range(TASKS))
            )

    asyncio.run(fill())


def _damage(path: Path, where: str) -> list[int]:
    """Write random bytes over pages of the (cleanly closed) store file; return their numbers."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # every page is in the file itself
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        roots = [
            page
            for (page,) in conn.execute(
                "SELECT rootpage FROM sqlite_master WHERE tbl_name = 'tasks' AND rootpage > 0"
            )
        ]
    finally:
        conn.close()
    wal = path.with_name(path.name + "-wal")
    assert not wal.exists() or wal.stat().st_size == 0, "the store's WAL still holds pages"
    # The tasks table and its indexes (every command reads them), or the header page.
    pages = sorted(roots) if where == "table pages" else [1]
    noise = random.Random(f"{where}").randbytes(page_size)
    with path.open("r+b") as f:
        for page in pages:
            f.seek((page - 1) * page_size)
            f.write(noise)
        f.flush()
        os.fsync(f.fileno())
    return pages


def _really_damaged(path: Path) -> str:
    """What SQLite itself says of the file (the test's premise: it is damaged)."""
    try:
        conn = sqlite3.connect(path)
        try:
            rows = conn.execute("PRAGMA integrity_check").fetchall()
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        return str(exc)
    verdict = "; ".join(str(r[0]) for r in rows[:3])
    assert verdict != "ok", "the damage went unnoticed by PRAGMA integrity_check"
    return verdict


def _shepherd(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHEPHERD_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(TESTS), env.get("PYTHONPATH", "")) if p)
    try:
        return subprocess.run(
            [sys.executable, "-m", "shepherd", *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr
        raise AssertionError(
            f"`shepherd {' '.join(args)}` still ran after {COMMAND_TIMEOUT:.0f} s on a damaged "
            f"store; the end of its stderr:\n{(err or '')[-3000:]}"
        ) from None


def _damage_problems(
    what: str, done: subprocess.CompletedProcess[str], *, only_line: bool
) -> list[str]:
    """What is wrong with how `what` reported the damage (nothing, ideally)."""
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    checks = [
        (done.returncode != 0, "exits non-zero"),
        ("Traceback" not in done.stderr, "shows no traceback"),
        (len(errors) == 1 and lines[-1] == errors[0], "ends with one `error:` line"),
        (not only_line or len(lines) == 1, "writes nothing else to stderr"),
        (any("damaged" in line.lower() for line in errors), "says the store is damaged"),
        (any("PRAGMA integrity_check" in line for line in errors), "names PRAGMA integrity_check"),
    ]
    failed = [wanted for ok, wanted in checks if not ok]
    if not failed:
        return []
    return [
        f"`{what}` should but does not: {'; '.join(failed)}. It exited {done.returncode}; "
        f"stderr:\n{done.stderr}"
    ]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("where", ["table pages", "header page"])
def test_a_damaged_store_file_is_named_not_retried(tmp_path: Path, where: str) -> None:
    store = tmp_path / "store.db"
    url = f"sqlite:///{store}"
    _store_with_tasks(store)
    pages = _damage(store, where)
    verdict = _really_damaged(store)

    ran = _shepherd("run", "--app", APP_SPEC, "--store", url, "--log-level", "info", cwd=tmp_path)
    listed = _shepherd("tasks", "--store", url, cwd=tmp_path)
    report = (
        f"\n[SQLite store damaged: random bytes over page(s) {pages} ({where})]"
        f"\n  integrity_check: {verdict[:200]}"
        f"\n  shepherd run -> exit {ran.returncode}: {ran.stderr.strip().splitlines()[-1:]}"
        f"\n  shepherd tasks -> exit {listed.returncode}: {listed.stderr.strip().splitlines()[-1:]}"
    )
    print(report)
    problems = _damage_problems("shepherd run", ran, only_line=False)
    problems += _damage_problems("shepherd tasks", listed, only_line=True)
    assert not problems, "\n\n".join(problems) + report
