"""`shepherd purge` against tasks a test wrote at chosen times.

The commands run in the test's process (`shepherd_cli_in_process`): what they print and
delete is the point here, not the process."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from shepherd.core.states import ProcessState
from shepherd.store.contract import NewTask
from shepherd.store.sqlite import SQLiteStore
from shepherd.testing import FakeClock

Cli = Callable[..., subprocess.CompletedProcess[str]]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


@pytest.fixture
def cli(shepherd_cli_in_process: Cli) -> Cli:
    """`shepherd ...` run in this process (support.cli_inprocess)."""
    return shepherd_cli_in_process


def ok(completed: subprocess.CompletedProcess[str]) -> str:
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


async def _ended(
    url: str, at: datetime, state: ProcessState, *, key: str | None = None, purge: bool = False
) -> str:
    """A task of `cliapp`'s `hello` workflow that ended in `state` at `at`; purged then if told."""
    store = SQLiteStore(url, clock=FakeClock(at))
    await store.open()
    try:
        task_id = (await store.submit_task(NewTask(workflow="hello", input={}, key=key))).task_id
        (task,) = await store.claim_tasks(locked_by="elsewhere:1:aa/s", limit=1)
        if state is ProcessState.PROCESSED:
            await store.finish_task(task_id, locked_by=task.locked_by or "", epoch=1, result="hi")
        else:
            await store.fail_task(
                task_id, locked_by=task.locked_by or "", epoch=1, state=state, error={"reason": "x"}
            )
        if purge:
            assert await store.purge_tasks(ended_before=at + timedelta(seconds=1), limit=1) == 1
        return task_id
    finally:
        await store.close()


def prepare(url: str) -> dict[str, Any]:
    """Five tasks that ended three days ago (one keyed), one in error as old, one an hour
    ago, and the tombstone of a task purged two days ago."""
    now = datetime.now(UTC)
    days_ago = now - timedelta(days=3)
    made: dict[str, Any] = {
        # First: its purge must find no other ended task.
        "purged": asyncio.run(
            _ended(url, now - timedelta(days=2), ProcessState.PROCESSED, key="k", purge=True)
        ),
        "old": [
            asyncio.run(_ended(url, days_ago, ProcessState.PROCESSED, key=f"order-{n}"))
            for n in range(4)
        ],
        "error": asyncio.run(_ended(url, days_ago, ProcessState.ERROR)),
        "recent": asyncio.run(_ended(url, now - timedelta(hours=1), ProcessState.CANCELLED)),
    }
    made["old"].append(asyncio.run(_ended(url, days_ago, ProcessState.COMPENSATED)))
    return made


def test_purge_deletes_every_ended_task_older_than_the_duration_in_batches(
    cli: Cli, cli_store_url: str, cli_env: dict[str, str]
) -> None:
    made = prepare(cli_store_url)
    env = {**cli_env, "SHEPHERD_PURGE_BATCH": "2", "SHEPHERD_KEY_RETENTION": "86400"}

    out = json.loads(ok(cli("purge", "--older-than", "2d", "--json", env=env)))

    assert (out["purged"], out["tombstones"]) == (5, 1)
    cutoff = datetime.fromisoformat(out["ended_before"])
    assert timedelta(days=2) <= datetime.now(UTC) - cutoff < timedelta(days=2, minutes=5)
    listed = json.loads(ok(cli("tasks", "--json")))["tasks"]
    assert {t["id"]: t["process_state"] for t in listed} == {
        made["error"]: "error",
        made["recent"]: "cancelled",
    }
    shown = cli("show", made["old"][0])
    assert shown.returncode == 3  # unknown task
    assert "it ended processed and was purged at" in shown.stderr
    # The tombstone of two days ago is past the one-day key retention: gone, so
    # that task is unknown, plainly.
    gone = cli("show", made["purged"])
    assert gone.returncode == 3
    assert gone.stderr.strip() == f"error: unknown task {made['purged']!r}"

    again = ok(cli("purge", "--older-than", "30m", "--app", "cliapp:app"))
    assert again.startswith("purged 1 task that ended before ")
    assert again.rstrip().endswith(", and 0 expired key tombstones")


def test_purge_refuses_a_bad_or_missing_duration(cli: Cli) -> None:
    bad = cli("purge", "--older-than", "a week")
    assert bad.returncode == 2
    assert "'a week' is not a duration" in bad.stderr
    missing = cli("purge")
    assert missing.returncode == 2
    assert "--older-than" in missing.stderr
