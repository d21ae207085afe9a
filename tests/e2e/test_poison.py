"""A poison task next to healthy ones: the poison is quarantined, the healthy tasks finish.

Two real worker processes share a store; a task whose step kills its process
(`os._exit(1)`) is submitted in the middle of 200 healthy ones, all in flight
at once, and every dead worker is started again at once, as a service manager
would. The crash is attributed to the task whose step was running in the dead
process: at the third crash it ends in `error` as suspected poison, with an
operator alert saying so, while every healthy task ends `processed` without a
failure counted, though each dead worker took the healthy steps it was running
down with it. The poison costs three worker deaths, no more.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from shepherd import App
from shepherd.core.records import Task
from shepherd.core.states import TERMINAL_STATES, ProcessState
from support.poison_app import WORKFLOW, build_app
from support.processes import Worker, start_process

TESTS = Path(__file__).resolve().parents[1]
ENDED = TERMINAL_STATES | {ProcessState.ERROR}
#: Healthy tasks next to the poison (all in flight at once), and next to the blocker.
HEALTHY = 200
BLOCKED_HEALTHY = 20
#: Backstop for the whole run (not a timing claim).
PATIENCE = 90.0

pytestmark = pytest.mark.slow


def spawn(store: str, workdir: Path, name: str) -> Worker:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHEPHERD_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(TESTS), env.get("PYTHONPATH", "")) if p)
    argv = [
        *(sys.executable, "-m", "shepherd", "run"),
        *("--app", "support.poison_app:app", "--store", store),
    ]
    return start_process(argv, workdir, name=name, env=env, ready_timeout=30)


async def run_next_to(
    app: App, bad: dict[str, bool], store: str, workdir: Path, *, healthy_tasks: int
) -> Outcome:
    """Submit healthy tasks around a bad one; run two workers, restarting the dead."""
    half = healthy_tasks // 2
    healthy = list(await asyncio.gather(*(app.submit(WORKFLOW, {"i": i}) for i in range(half))))
    culprit = await app.submit(WORKFLOW, bad)
    healthy += await asyncio.gather(
        *(app.submit(WORKFLOW, {"i": i}) for i in range(half, healthy_tasks))
    )
    workers = [spawn(store, workdir, f"w{n}") for n in range(2)]
    restarts = 0
    try:
        deadline = time.monotonic() + PATIENCE
        while True:
            for n, worker in enumerate(workers):
                if worker.process.poll() is not None:  # the service manager restarts it
                    worker.close()
                    restarts += 1
                    workers[n] = spawn(store, workdir, f"w{n}-{restarts}")
            tasks = [await app.get_task(t) for t in (*healthy, culprit)]
            if all(t.process_state in ENDED for t in tasks):
                break
            assert time.monotonic() < deadline, (
                f"not done: {[str(t.process_state) for t in tasks]}; restarts {restarts}"
            )
            await asyncio.sleep(0.1)  # a poll, with the deadline above
    finally:
        stderr = "".join(f"\n--- {w.name}:\n{w.stderr()}" for w in workers)
        for worker in workers:
            worker.close()
    ended = {t: await app.get_task(t) for t in healthy}
    unfinished = {
        t: (str(x.process_state), x.error)
        for t, x in ended.items()
        if x.process_state is not ProcessState.PROCESSED
    }
    assert not unfinished, f"healthy tasks did not finish: {unfinished}{stderr}"
    return Outcome(
        healthy=ended, culprit=await app.get_task(culprit), restarts=restarts, stderr=stderr
    )


@dataclass
class Outcome:
    healthy: dict[str, Task]
    culprit: Task
    restarts: int
    stderr: str


@pytest.mark.timeout(180)
async def test_a_poison_task_is_quarantined_and_its_neighbours_finish(
    shared_store: str, tmp_path: Path
) -> None:
    app = build_app(shared_store)
    async with app:
        run = await run_next_to(
            app, {"poison": True}, shared_store, tmp_path, healthy_tasks=HEALTHY
        )
        ended, stderr = run.healthy, run.stderr
        charged = {
            t: [(e.kind, e.detail) for e in await app.history(t) if e.kind in ("reset", "error")]
            for t, x in ended.items()
            if x.failure_count
        }
        print(f"healthy tasks charged a failure: {len(charged)} of {len(ended)}")
        assert not charged, (
            f"failures counted for {len(charged)} healthy tasks: {dict(list(charged.items())[:5])}"
            f"{stderr}"
        )
        compensated = {
            t: kinds
            for t in ended
            if (kinds := [e.kind for e in await app.history(t) if "compensat" in e.kind])
        }
        assert not compensated, f"healthy tasks compensated: {compensated}"
        quarantined = run.culprit
        assert quarantined.process_state is ProcessState.ERROR, stderr
        assert isinstance(quarantined.error, dict)
        reason = str(quarantined.error["reason"])
        assert reason.startswith("suspected poison: running at 3 worker crashes (pids "), (
            quarantined.error
        )
        alerts = await app.alerts(task_id=quarantined.id)
        assert [a.reason for a in alerts] == [reason], alerts
        print(f"worker deaths: {run.restarts}")
        assert run.restarts <= 3, f"the poison caused {run.restarts} worker deaths{stderr}"
        assert run.restarts == 3, f"{run.restarts} worker deaths, yet quarantined{stderr}"


@pytest.mark.timeout(180)
async def test_a_blocking_task_is_named_while_it_blocks_and_its_neighbours_finish(
    shared_store: str, tmp_path: Path
) -> None:
    app = build_app(shared_store)
    async with app:
        run = await run_next_to(
            app, {"block": True}, shared_store, tmp_path, healthy_tasks=BLOCKED_HEALTHY
        )
        ended, stderr, blocker = run.healthy, run.stderr, run.culprit.id
        assert run.restarts == 0, stderr
        # A neighbour whose step was already running in the frozen process may
        # expire before the freeze can be told from a slow step: one failure,
        # never its end (see docs/guarantees.md, section 13).
        charged = sorted(x.failure_count for x in ended.values() if x.failure_count)
        print(f"healthy tasks charged a failure: {charged}")
        assert all(x.failure_count < 3 for x in ended.values()), stderr
        assert f"by agent 'work' (task {blocker}, step 1)" in stderr, stderr
        # The blocker is charged: quarantined after three freezes of processes it
        # owned, or failed by its own expired windows where it ran apart.
        blocked = run.culprit
        assert blocked.process_state is ProcessState.ERROR, stderr
        assert isinstance(blocked.error, dict)
        reason = str(blocked.error["reason"])
        assert reason.startswith(
            ("suspected poison: running at 3 worker freezes (pids ", "complete_by expired 3 times")
        ), blocked.error
