"""`shepherd show` and `shepherd tasks --parent`: the links of child workflows, both ways.

A parent and two children are written in the test's store as a scheduler
writes them (`start_child`); the commands, run in this process, show the
children on the parent, the parent on a child, and list the children.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from shepherd.store.contract import NewTask
from shepherd.store.sqlite import SQLiteStore
from shepherd.testing import FakeClock

Cli = Callable[..., subprocess.CompletedProcess[str]]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


async def _family(url: str) -> str:
    """A task of `hello` waiting on a child (step 1), with a started one (step 2); its id."""
    store = SQLiteStore(url, clock=FakeClock(datetime.now(UTC)))
    await store.open()
    try:
        task_id = (await store.submit_task(NewTask(workflow="hello", input={}))).task_id
        (task,) = await store.claim_tasks(locked_by="elsewhere:1:aa/s", limit=1)
        for seq, policy in ((1, "wait"), (2, "cancel")):
            await store.start_child(
                task_id,
                locked_by="elsewhere:1:aa/s",
                epoch=task.lock_epoch,
                seq=seq,
                child_id=f"{task_id}.{seq}",
                workflow="hello",
                input={"n": seq},
                key=None,
                on_parent_end=policy,
                complete_within=30.0,
            )
        await store.wait_children(
            task_id, locked_by="elsewhere:1:aa/s", epoch=task.lock_epoch, seqs=[1]
        )
        return task_id
    finally:
        await store.close()


def test_show_and_tasks_parent_give_the_links_both_ways(
    shepherd_cli_in_process: Cli, cli_store_url: str
) -> None:
    cli = shepherd_cli_in_process
    task_id = asyncio.run(_family(cli_store_url))

    parent = cli("show", task_id)
    assert parent.returncode == 0, parent.stderr
    assert "children:" in parent.stdout
    assert f"step 1: {task_id}.1 hello (pending)" in parent.stdout
    assert f"step 2: {task_id}.2 hello (pending, cancel)" in parent.stdout
    child = cli("show", f"{task_id}.2", "--json")
    assert child.returncode == 0, child.stderr
    assert json.loads(child.stdout)["parent"] == {"task": task_id, "seq": 2}
    listed = cli("tasks", "--parent", task_id, "--json")
    assert listed.returncode == 0, listed.stderr
    assert [t["id"] for t in json.loads(listed.stdout)["tasks"]] == [
        f"{task_id}.1",
        f"{task_id}.2",
    ]
    none = cli("tasks", "--parent", f"{task_id}.1", "--json")
    assert json.loads(none.stdout)["count"] == 0
    listed_all = cli("tasks", "--workflow", "hello")
    (line,) = [row for row in listed_all.stdout.splitlines() if row.startswith(task_id + " ")]
    assert "pending, waiting" in line
