"""`shepherd signal TASK NAME JSON`: an operator sends a signal; `shepherd show` lists it.

The task waits in the test's store as a scheduler leaves it (its wait for
`approval` recorded, its claim given up); the command, run in this process,
delivers the signal into that wait, says so, stores a second send with the
same idempotency key once, and refuses an unknown task, an empty name and a
payload that is not JSON, storing nothing.
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


async def _waiting(url: str) -> str:
    """A task of `hello` waiting for signal `approval`; its id."""
    store = SQLiteStore(url, clock=FakeClock(datetime.now(UTC)))
    await store.open()
    try:
        task_id = (await store.submit_task(NewTask(workflow="hello", input={}, key="k1"))).task_id
        (task,) = await store.claim_tasks(locked_by="elsewhere:1:aa/s", limit=1)
        await store.wait_signal(
            task_id,
            locked_by="elsewhere:1:aa/s",
            epoch=task.lock_epoch,
            seq=1,
            name="approval",
            timeout_at=None,
        )
        return task_id
    finally:
        await store.close()


def test_signal_delivers_once_and_show_lists_it(
    shepherd_cli_in_process: Cli, cli_store_url: str
) -> None:
    cli = shepherd_cli_in_process
    task_id = asyncio.run(_waiting(cli_store_url))

    sent = cli("signal", "k1", "approval", '{"ok": true}', "--idempotency-key", "a1", "--json")

    assert sent.returncode == 0, sent.stderr
    told = json.loads(sent.stdout)
    assert (told["task_id"], told["delivered"], told["duplicate"]) == (task_id, True, False)
    again = cli("signal", task_id, "approval", '{"ok": true}', "--idempotency-key", "a1")
    assert again.returncode == 0, again.stderr
    assert f"signal {told['id']} to task {task_id}: already sent" in again.stdout
    for args, code, says in [
        (("no-such-task", "approval", "1"), 3, "no-such-task"),
        ((task_id, "", "1"), 2, "non-empty"),
        ((task_id, "approval", "{nope"), 2, "JSON"),
    ]:
        refused = cli("signal", *args)
        assert refused.returncode == code, refused.stderr
        assert says in refused.stderr
    shown = cli("show", task_id, "--json")
    assert shown.returncode == 0, shown.stderr
    (signal,) = json.loads(shown.stdout)["signals"]
    assert (signal["name"], signal["payload"], signal["consumed_seq"]) == (
        "approval",
        {"ok": True},
        1,
    )
    table = cli("show", task_id)
    assert "signals" in table.stdout
    assert "approval" in table.stdout
