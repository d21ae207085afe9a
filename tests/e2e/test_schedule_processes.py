"""A schedule run by three real worker processes, one SIGKILLed midway: one task per tick.

Each process runs a scheduler and a supervisor; whichever leads fires the
ticks, and a tick's task key holds its instant. Over the run, the ticks that
have a task are consecutive (none lost when the killed process led) and each
has exactly one task. One test per backend.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import sys
import time
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import pytest

from support.processes import WORKER_APP, start_process, workers
from support.schedule_app import EVERY, build_app

if TYPE_CHECKING:
    from pathlib import Path

    from shepherd import App

pytestmark = pytest.mark.slow

SCRIPT = WORKER_APP.with_name("schedule_app.py")
#: Seconds to wait for an outcome before failing (a backstop, not a timing claim).
PATIENCE = 30.0
PREFIX = "schedule:beat@"


async def _ticks(app: App) -> list[datetime]:
    tasks = await app.list_tasks(workflow="beat.log", limit=1000)
    return sorted(datetime.fromisoformat(t.key[len(PREFIX) :]) for t in tasks if t.key)


async def _until(app: App, count: int) -> list[datetime]:
    deadline = time.monotonic() + PATIENCE
    while len(ticks := await _ticks(app)) < count:
        assert time.monotonic() < deadline, f"only {len(ticks)} ticks fired"
        await asyncio.sleep(0.05)
    return ticks


async def test_three_processes_fire_one_task_per_tick_through_a_kill(
    shared_store: str, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHEPHERD_")}
    async with build_app(shared_store) as app:
        with workers() as started:
            for i in range(3):
                argv = [sys.executable, str(SCRIPT), shared_store]
                started.append(
                    start_process(argv, tmp_path, name=f"w{i}", env=env, ready_timeout=20)
                )
            await _until(app, 4)
            started[0].kill()  # SIGKILL: the leader, or not; another takes over either way
            ticks = await _until(app, 12)
    # Each tick once (its key), and none missing between the first and the last.
    assert len(set(ticks)) == len(ticks)
    gaps = {b - a for a, b in itertools.pairwise(ticks)}
    assert gaps == {timedelta(seconds=EVERY)}, ticks
