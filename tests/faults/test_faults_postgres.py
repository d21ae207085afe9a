"""Workers survive PostgreSQL faults: a restart, a stop, killed sessions, a dead leader.

Two `shepherd run` processes work through a few hundred three-step workflows
on a database of the fault suite's own cluster (never the shared server). Once
about half the steps have run, the server is faulted; the test process keeps
submitting through the fault (each refused submit retried under its key). Then
every task must end `processed`, every acknowledged submit among them, none
charged a failure (the app's workflow has `max_failures=1`: one charge would
end a task in `error`) nor compensated, with at most one duplicate execution
per task unfinished at the fault, and no worker process may have exited: a
store outage is a pause, not a crash.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from support.fault_app import build_app
from support.fault_run import FaultRun, PostgresObserver, owner_pid
from support.processes import workers

if TYPE_CHECKING:
    from pathlib import Path

    from shepherd import App
    from support.pgcluster import FaultDb
    from support.processes import Worker

pytestmark = [pytest.mark.faults, pytest.mark.slow]

#: Workflows per test: a few seconds of work for two workers of 20 workflows each.
TASKS = 300
#: How long the server stays stopped.
STOPPED_FOR = 20.0
#: The pause between the two rounds of terminated sessions.
TERMINATE_GAP = 3.0


async def start_run(
    fault: str, db: FaultDb, tmp_path: Path, running: list[Worker], app: App
) -> FaultRun:
    """Two workers, TASKS workflows, and about half the steps run."""
    run = FaultRun(
        fault=fault,
        app=app,
        observer=PostgresObserver(db.url),
        store_url=db.url,
        workdir=tmp_path,
        running=running,
    )
    await run.start_workers(["worker-1", "worker-2"])
    await run.submit(TASKS)
    await run.wait_progress(0.5)
    return run


@pytest.mark.timeout(200)
async def test_workers_survive_a_postgres_restart(fault_db: FaultDb, tmp_path: Path) -> None:
    async with build_app(fault_db.url) as app:
        with workers() as running:
            run = await start_run(
                "PostgreSQL restarted (pg_ctl restart -m fast)", fault_db, tmp_path, running, app
            )
            async with run.trickle():
                await run.fault_starts()
                await asyncio.to_thread(fault_db.cluster.restart, "fast")
                run.fault_ends()
            await run.wait_done()
            await run.verify()


@pytest.mark.timeout(200)
async def test_workers_survive_the_server_stopped_for_twenty_seconds(
    fault_db: FaultDb, tmp_path: Path
) -> None:
    async with build_app(fault_db.url) as app:
        with workers() as running:
            run = await start_run(
                f"PostgreSQL stopped for {STOPPED_FOR:.0f} s", fault_db, tmp_path, running, app
            )
            async with run.trickle():
                await run.fault_starts()
                await asyncio.to_thread(fault_db.cluster.stop, "fast")
                await asyncio.sleep(STOPPED_FOR)  # the fault's duration
                await asyncio.to_thread(fault_db.cluster.start)
                run.fault_ends()
            await run.wait_done()
            await run.verify()


@pytest.mark.timeout(200)
async def test_workers_survive_every_session_terminated_twice(
    fault_db: FaultDb, tmp_path: Path
) -> None:
    async with build_app(fault_db.url) as app:
        with workers() as running:
            run = await start_run(
                f"every session of the database terminated, twice, {TERMINATE_GAP:.0f} s apart",
                fault_db,
                tmp_path,
                running,
                app,
            )
            async with run.trickle():
                ended = []
                for round_ in range(2):
                    if round_:
                        await asyncio.sleep(TERMINATE_GAP)  # the fault's rhythm
                    await run.fault_starts()
                    ended.append(
                        await asyncio.to_thread(fault_db.cluster.terminate_backends, fault_db.name)
                    )
                run.fault_ends()
                run.notes.append(f"sessions terminated: {ended[0]}, then {ended[1]}")
                assert all(ended), f"no session was there to terminate: {ended}"
            await run.wait_done()
            await run.verify()


_LEADER = "SELECT holder FROM leases WHERE name = 'supervisor' AND expires_at > now()"


@pytest.mark.timeout(200)
async def test_the_leader_killed_during_a_restart_is_replaced(
    fault_db: FaultDb, tmp_path: Path
) -> None:
    async with build_app(fault_db.url) as app:
        with workers() as running:
            run = await start_run(
                "the supervisor leader SIGKILLed while PostgreSQL restarts",
                fault_db,
                tmp_path,
                running,
                app,
            )
            pids = {w.pid: w for w in run.watched}
            holder = ""

            async def a_worker_leads() -> bool:
                nonlocal holder
                rows = await run.observer.rows(_LEADER)
                holder = rows[0][0] if rows else ""
                return bool(holder) and owner_pid(holder) in pids

            await run.wait_for("a worker holding the supervisor lease", a_worker_leads, 30.0)
            leader = pids[owner_pid(holder)]
            async with run.trickle():
                await run.fault_starts()
                await asyncio.to_thread(fault_db.cluster.stop, "fast")
                leader.kill()  # between the restart's stop and its start
                await asyncio.to_thread(fault_db.cluster.start)
                run.fault_ends()
                run.watched.remove(leader)
                # As a service manager would: the dead process is replaced.
                await run.start_workers(["replacement"])
                run.notes.append(
                    f"killed the leader {leader.name} (pid {leader.pid}, lease holder {holder})"
                )
            await run.wait_done()
            rows = await run.observer.rows(_LEADER)
            now_leads = {w.pid: w.name for w in run.watched}.get(
                owner_pid(rows[0][0]) if rows else 0, "nobody alive"
            )
            run.notes.append(f"the supervisor lease is now held by: {now_leads}")
            await run.verify()
