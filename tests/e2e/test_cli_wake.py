"""`shepherd wake TASK`: an operator wakes a sleeping task (one waiting in `ctx.sleep`).

The task is put asleep in the test's store as a scheduler puts it (its sleep
step recorded, its claim given up until an hour from now); the command, run
in this process, wakes it, and refuses a task that is not sleeping or unknown.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from shepherd.core.states import ProcessState
from shepherd.store.contract import NewTask
from shepherd.store.sqlite import SQLiteStore
from shepherd.testing import FakeClock

Cli = Callable[..., subprocess.CompletedProcess[str]]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


async def _asleep(url: str) -> str:
    """A task of `hello` asleep until an hour from now; its id."""
    store = SQLiteStore(url, clock=FakeClock(datetime.now(UTC)))
    await store.open()
    try:
        task_id = (await store.submit_task(NewTask(workflow="hello", input={}))).task_id
        (task,) = await store.claim_tasks(locked_by="elsewhere:1:aa/s", limit=1)
        await store.sleep_task(
            task_id,
            locked_by="elsewhere:1:aa/s",
            epoch=task.lock_epoch,
            seq=1,
            wake_at=store.now() + timedelta(hours=1),
        )
        return task_id
    finally:
        await store.close()


def test_wake_wakes_a_sleeping_task_and_refuses_others(
    shepherd_cli_in_process: Cli, cli_store_url: str
) -> None:
    cli = shepherd_cli_in_process
    task_id = asyncio.run(_asleep(cli_store_url))

    woken = cli("wake", task_id, "--json", "--by", "ops")

    assert woken.returncode == 0, woken.stderr
    shown = json.loads(woken.stdout)
    assert shown["process_state"] == ProcessState.PENDING
    assert datetime.fromisoformat(shown["not_before"]) <= datetime.now(UTC)
    again = cli("wake", task_id)
    assert again.returncode == 2, again.stderr
    assert "not sleeping" in again.stderr
    unknown = cli("wake", "no-such-task")
    assert unknown.returncode == 3, unknown.stderr
    assert "unknown task 'no-such-task'" in unknown.stderr
