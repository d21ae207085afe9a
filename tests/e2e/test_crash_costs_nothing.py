"""A crash or a freeze of a worker process costs the healthy tasks it held nothing.

Two real `shepherd run` workers (`support.fault_app`) share a store, SQLite or
PostgreSQL, and work through 600 three-step workflows, each step a handler of
0.05 to 0.5 s, with `complete_within=3` and `max_failures=1`: a single failure
charged would end a task in `error`. Once a quarter of the steps have
completed, and at least 300 steps are in flight at once, one worker is hit:

- SIGKILLed, then started again at once, as a service manager would;
- frozen: SIGSTOPped for 10 s, then SIGCONTed;
- SQLite: frozen while it holds the writers' turn, inside a write transaction
  (every other writer waits for it meanwhile).

Then every task must end `processed` with `failure_count` 0 and nothing
compensated, every acknowledged submit among them, with at most one duplicate
execution per task unfinished at the fault. Nothing here asserts a duration:
the harness polls the store with deadlines that are backstops only.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from shepherd.store.sqlite.write_lock import holder_pid, lock_path
from support.fault_app import FREEZE_ENV, Profile, build_app
from support.fault_run import FaultRun, Observer, PostgresObserver, SQLiteObserver
from support.files import written_lines
from support.processes import workers

if TYPE_CHECKING:
    from shepherd import App
    from support.processes import Worker

pytestmark = pytest.mark.slow

#: A claim's window of 3 s, one failure ends a task, steps of 0.05 to 0.5 s, and
#: room for every task of the load in flight at once in the two workers.
PROFILE = Profile(
    complete_within=3.0, step_within=2.0, max_failures=1, max_in_flight=300, pace=(0.05, 0.5)
)
TASKS = 600
#: Steps in flight (running) at once when the fault strikes, at least.
IN_FLIGHT = 300
#: The share of the load's steps completed before the fault (so steps of every seq run).
PROGRESS = 0.25
#: How long a frozen worker stays stopped.
FROZEN_FOR = 10.0
#: Backstop for the freeze to land inside a write transaction (not a timing claim).
FREEZE_PATIENCE = 30.0


def observer_of(store: str) -> Observer:
    if store.startswith("sqlite:///"):
        return SQLiteObserver(Path(store.removeprefix("sqlite:///")))
    return PostgresObserver(store)


async def start(
    fault: str, store: str, tmp_path: Path, app: App, running: list[Worker]
) -> FaultRun:
    """Two workers and the load submitted (the fault comes once IN_FLIGHT steps run)."""
    run = FaultRun(
        fault=fault,
        app=app,
        observer=observer_of(store),
        store_url=store,
        workdir=tmp_path,
        running=running,
        profile=PROFILE,
    )
    await run.start_workers(["worker-1", "worker-2"])
    return run


async def leader_and_follower(run: FaultRun) -> tuple[Worker, Worker]:
    """The worker holding the supervisor lease, and the other one."""
    pids = {w.pid: w for w in run.watched}
    leader = 0

    async def a_worker_leads() -> bool:
        nonlocal leader
        leader = await run.leader_pid() or 0
        return leader in pids

    await run.wait_for("a worker holding the supervisor lease", a_worker_leads, 30.0)
    (follower,) = (w for pid, w in pids.items() if pid != leader)
    return pids[leader], follower


@pytest.mark.timeout(180)
async def test_a_killed_and_restarted_worker_costs_its_tasks_nothing(
    shared_store: str, tmp_path: Path
) -> None:
    async with build_app(shared_store, profile=PROFILE) as app:
        with workers() as running:
            run = await start(
                f"the supervisor's leader SIGKILLed with {IN_FLIGHT}+ steps in flight, "
                "then restarted",
                shared_store,
                tmp_path,
                app,
                running,
            )
            victim, _ = await leader_and_follower(run)
            await run.submit(TASKS)
            await run.wait_progress(PROGRESS)
            await run.fault_starts(running=IN_FLIGHT)
            victim.kill()
            run.fault_ends()
            await run.replace_worker(victim, "worker-1-restarted")
            run.notes.append(f"killed {victim.name} (pid {victim.pid}), the supervisor's leader")
            await run.wait_done()
            await run.verify()


@pytest.mark.timeout(180)
async def test_a_worker_frozen_for_ten_seconds_costs_its_tasks_nothing(
    shared_store: str, tmp_path: Path
) -> None:
    async with build_app(shared_store, profile=PROFILE) as app:
        with workers() as running:
            run = await start(
                f"a worker SIGSTOPped for {FROZEN_FOR:.0f} s with {IN_FLIGHT}+ steps in flight",
                shared_store,
                tmp_path,
                app,
                running,
            )
            _, victim = await leader_and_follower(run)
            await run.submit(TASKS)
            await run.wait_progress(PROGRESS)
            await run.fault_starts(running=IN_FLIGHT)
            victim.freeze()
            try:
                await asyncio.sleep(FROZEN_FOR)  # the fault's duration, not a synchronisation
            finally:
                victim.thaw()
            run.fault_ends()
            run.notes.append(f"froze {victim.name} (pid {victim.pid}), not the leader")
            await run.wait_done()
            await run.verify()


@pytest.mark.timeout(180)
async def test_a_worker_frozen_inside_a_sqlite_write_costs_its_tasks_nothing(
    tmp_path: Path,
) -> None:
    """The frozen worker holds the writers' turn (and SQLite's lock): nobody writes for 10 s."""
    db = tmp_path / "shared.db"
    store = f"sqlite:///{db}"
    mark = tmp_path / "frozen.jsonl"
    async with build_app(store, profile=PROFILE) as app:
        with workers() as running:
            run = FaultRun(
                fault=f"a worker SIGSTOPped for {FROZEN_FOR:.0f} s inside a SQLite write "
                f"transaction, holding the writers' turn, with {IN_FLIGHT}+ steps in flight",
                app=app,
                observer=SQLiteObserver(db),
                store_url=store,
                workdir=tmp_path,
                running=running,
                profile=PROFILE,
                worker_env={FREEZE_ENV: str(mark)},
            )
            await run.start_workers(["worker-1", "worker-2"])
            _, victim = await leader_and_follower(run)
            await run.submit(TASKS)
            await run.wait_progress(PROGRESS)
            await run.fault_starts(running=IN_FLIGHT)
            os.kill(victim.pid, signal.SIGUSR1)  # arms the freeze (support.fault_app)
            try:

                async def frozen_in_a_write() -> bool:
                    return bool(written_lines(mark)) and victim.stopped()

                await run.wait_for(
                    "the worker stopped inside a write", frozen_in_a_write, FREEZE_PATIENCE
                )
                where = json.loads(written_lines(mark)[0])
                holder = turn_holder(db)
                run.notes.append(
                    f"froze {victim.name} (pid {victim.pid}) at `{where['statement'][:60]}...`; "
                    f"the writers' turn held by pid {holder}"
                )
                assert where["pid"] == victim.pid, where
                assert holder == victim.pid, (
                    f"the frozen worker {victim.pid} does not hold the writers' turn "
                    f"(holder: {holder}); it stopped in thread {where.get('thread')} at\n"
                    f"{where.get('stack')}{run.report_tail()}"
                )
                await asyncio.sleep(FROZEN_FOR)  # the fault's duration, not a synchronisation
            finally:
                victim.thaw()
            run.fault_ends()
            await run.wait_done()
            await run.verify()


def turn_holder(db: Path) -> int | None:
    """The pid holding the SQLite writers' turn (the `flock` on `<file>-lock`), if any."""
    fd = os.open(lock_path(str(db)), os.O_RDONLY)
    try:
        return holder_pid(fd)
    finally:
        os.close(fd)
