"""Signals across real processes: a restart while waiting changes nothing; one key, one signal.

A worker process runs a workflow to its wait for signal `go` and is
SIGKILLed there; the task still waits, unowned. Two other processes then send
the same signal with the same idempotency key at once: one signal is stored
(both get its id). A new worker delivers it once: the workflow goes on from
its wait, its first step not run again. One test per backend.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import TYPE_CHECKING

import pytest

from shepherd.core.states import ProcessState, StepKind, StepState
from support.processes import WORKER_APP, start_process, workers
from support.signal_app import build_app

if TYPE_CHECKING:
    from pathlib import Path

    from shepherd import App
    from shepherd.core.records import Task

pytestmark = pytest.mark.slow

SCRIPT = WORKER_APP.with_name("signal_app.py")
#: Seconds to wait for an outcome before failing (a backstop, not a timing claim).
PATIENCE = 30.0


async def _until(app: App, task_id: str, check: str) -> Task:
    deadline = time.monotonic() + PATIENCE
    while True:
        task = await app.get_task(task_id)
        waits = [s for s in task.steps if s.kind is StepKind.SIGNAL]
        running = bool(waits) and waits[0].state is StepState.RUNNING
        if check == "waiting" and running and task.locked_by is None:
            return task
        if check == "ended" and task.process_state is ProcessState.PROCESSED:
            return task
        assert time.monotonic() < deadline, f"task {task_id} is not {check}: {task}"
        await asyncio.sleep(0.05)


async def test_a_restart_while_waiting_and_two_senders_of_one_key_deliver_once(
    shared_store: str, tmp_path: Path
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SHEPHERD_")}
    worker = [sys.executable, str(SCRIPT), shared_store, "worker"]
    async with build_app(shared_store) as app:
        with workers() as started:
            started.append(start_process(worker, tmp_path, name="w1", env=env, ready_timeout=20))
            task_id = await app.submit("approve", {})
            await _until(app, task_id, "waiting")
            started[0].kill()  # SIGKILL while the task waits
            waiting = await app.get_task(task_id)
            assert (waiting.process_state, waiting.locked_by) == (ProcessState.PENDING, None)

            send = [sys.executable, str(SCRIPT), shared_store, "send", task_id, "hook-1"]
            senders = [
                await asyncio.create_subprocess_exec(
                    *send, stdout=asyncio.subprocess.PIPE, env=env, cwd=tmp_path
                )
                for _ in range(2)
            ]
            async with asyncio.timeout(PATIENCE):
                done = await asyncio.gather(*(s.communicate() for s in senders))
            outputs = [out.decode() for out, _ in done]
            assert [s.returncode for s in senders] == [0, 0], outputs
            assert len(await app.operations.signals.of(task_id)) == 1
            assert _waiting_still(await app.get_task(task_id))

            started.append(start_process(worker, tmp_path, name="w2", env=env, ready_timeout=20))
            task = await _until(app, task_id, "ended")
            signals = await app.operations.signals.of(task_id)
    (signal,) = signals
    assert {line.split()[1] for line in outputs} == {str(signal.id)}
    assert signal.consumed_seq == 2
    assert task.result is not None
    first, got, _ = task.result
    assert (first, got) == (1, signal.payload)
    assert [s.attempt for s in task.steps if s.kind is StepKind.FORWARD] == [1, 1]


def _waiting_still(task: Task) -> bool:
    """Delivered into its wait with no worker running: due now, still pending and unowned."""
    return task.process_state is ProcessState.PENDING and task.locked_by is None
