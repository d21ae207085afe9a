"""A parent SIGKILLed after starting its children does not start them twice, on both backends.

A real process runs `order`: it starts one child, awaits another, and then
holds its claim on a step that never returns there. The process is SIGKILLed;
a second process takes the parent over once its claim expires, replays both
children's steps from the store, and finishes it. Each child was started
once: two `shipment` tasks, two `child_started` events, every task processed.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import TYPE_CHECKING

import pytest

from shepherd import ProcessState, StepState
from shepherd.core.states import StepKind
from support.child_app import build_app
from support.processes import WORKER_APP, start_process, workers

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from shepherd import App
    from shepherd.core.records import Task

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

SCRIPT = WORKER_APP.with_name("child_app.py")
#: Seconds to wait for an outcome before failing (a backstop, not a timing claim).
PATIENCE = 30.0


async def _until(app: App, task_id: str, check: Callable[[Task], bool]) -> Task:
    deadline = time.monotonic() + PATIENCE
    while not check(task := await app.get_task(task_id)):
        assert time.monotonic() < deadline, f"task {task_id} stuck: {task}"
        await asyncio.sleep(0.05)
    return task


def _holding(task: Task) -> bool:
    return any(s.seq == 3 and s.state is StepState.RUNNING for s in task.steps)


async def test_a_parent_killed_after_starting_children_does_not_start_them_twice(
    shared_store: str, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHEPHERD_")}
    async with build_app(shared_store) as app:
        with workers() as started:
            argv = [sys.executable, str(SCRIPT), shared_store, "--hang"]
            started.append(start_process(argv, tmp_path, name="a", env=env, ready_timeout=20))
            task_id = await app.submit("order", "box")
            held = await _until(app, task_id, _holding)
            started[0].kill()  # SIGKILL, the parent's claim held, both children started
            argv = [sys.executable, str(SCRIPT), shared_store]
            started.append(start_process(argv, tmp_path, name="b", env=env, ready_timeout=20))
            done = await _until(app, task_id, lambda t: t.process_state is ProcessState.PROCESSED)
            shipments = await app.list_tasks(workflow="shipment", limit=10)
            history = await app.history(task_id)
    assert [(s.seq, s.kind) for s in held.steps][:2] == [(1, StepKind.CHILD), (2, StepKind.CHILD)]
    assert sorted(t.id for t in shipments) == [f"{task_id}.1", f"{task_id}.2"]
    assert {t.process_state for t in shipments} == {ProcessState.PROCESSED}
    assert [e.kind for e in history].count("child_started") == 2
    assert done.result[:2] == [f"{task_id}.1", "shipped boxb"]
    assert done.result[2] == started[1].pid
