"""A poison task next to healthy ones: the poison is quarantined, the healthy tasks finish.

Two real worker processes share a store; a task whose step kills its process
(`os._exit(1)`) is submitted with 20 healthy ones, and every dead worker is
started again at once, as a service manager would. The crash is attributed to
the task whose step was running in the dead process: after three crashes it
ends in `error` as suspected poison, while every healthy task ends `processed`
without a failure counted.
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
HEALTHY = 20
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


async def run_next_to(app: App, bad: dict[str, bool], store: str, workdir: Path) -> Outcome:
    """Submit 20 healthy tasks around a bad one; run two workers, restarting the dead."""
    healthy = [await app.submit(WORKFLOW, {"i": i}) for i in range(HEALTHY // 2)]
    culprit = await app.submit(WORKFLOW, bad)
    healthy += [await app.submit(WORKFLOW, {"i": i}) for i in range(HEALTHY // 2, HEALTHY)]
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
        run = await run_next_to(app, {"poison": True}, shared_store, tmp_path)
        ended, stderr = run.healthy, run.stderr
        charged = {
            t: [(e.kind, e.detail) for e in await app.history(t) if e.kind in ("reset", "error")]
            for t, x in ended.items()
            if x.failure_count
        }
        assert not charged, f"failures counted for healthy tasks: {charged}{stderr}"
        quarantined = run.culprit
        assert quarantined.process_state is ProcessState.ERROR, stderr
        assert isinstance(quarantined.error, dict)
        assert str(quarantined.error["reason"]).startswith(
            "suspected poison: running at 3 worker crashes (pids "
        ), quarantined.error
        assert run.restarts == 3, f"{run.restarts} restarts{stderr}"


@pytest.mark.timeout(180)
async def test_a_blocking_task_is_named_while_it_blocks_and_its_neighbours_finish(
    shared_store: str, tmp_path: Path
) -> None:
    app = build_app(shared_store)
    async with app:
        run = await run_next_to(app, {"block": True}, shared_store, tmp_path)
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
