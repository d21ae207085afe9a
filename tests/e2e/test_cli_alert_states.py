"""`shepherd alerts --state`: open, acknowledged and resolved alerts, on SQLite and PostgreSQL.

Three tasks fail into `error`; one is acknowledged, one is retried, fails
again (its alert raised twice), is retried again and processed (resolved).
The commands run in the test's process (`shepherd_cli_in_process`).
"""

from __future__ import annotations

import asyncio
import re
import subprocess
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from shepherd.core.states import ProcessState
from shepherd.store import open_store
from shepherd.store.contract import NewTask
from support.cli_checks import ok, ok_json

if TYPE_CHECKING:
    from shepherd.store.contract import Store

Cli = Callable[..., subprocess.CompletedProcess[str]]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

_OWNER = "elsewhere:1:0000/s"


@pytest.fixture
def cli(shepherd_cli_in_process: Cli, cli_env: dict[str, str], shared_store: str) -> Cli:
    """`shepherd ...` on the test's shared store (a SQLite file, or a PostgreSQL database)."""
    env = {**cli_env, "SHEPHERD_STORE": shared_store}

    def run(*args: str, columns: str = "80") -> subprocess.CompletedProcess[str]:
        return shepherd_cli_in_process(*args, env={**env, "COLUMNS": columns})

    return run


def alerts_of_every_state(url: str) -> dict[str, str]:
    """Tasks whose alerts are open, acknowledged, and resolved (raised twice first): their ids."""

    async def fail(store: Store, task_id: str, reason: str) -> None:
        (claimed,) = await store.claim_tasks(locked_by=_OWNER, limit=10)
        await store.fail_task(
            task_id,
            locked_by=_OWNER,
            epoch=claimed.lock_epoch,
            state=ProcessState.ERROR,
            error={"reason": reason},
        )

    async def go() -> dict[str, str]:
        store = open_store(url)
        await store.open()
        try:
            ids = {}
            for key in ("open", "acknowledged", "resolved"):
                task = NewTask(workflow="orders.pay", input={}, key=key)
                ids[key] = (await store.submit_task(task)).task_id
                await fail(store, ids[key], f"card of {key} declined")
            (acked,) = await store.list_alerts(task_id=ids["acknowledged"])
            await store.acknowledge_alert(acked.id, by="anna")
            await store.retry_task(ids["resolved"], by="anna")
            await fail(store, ids["resolved"], "card declined again")
            await store.retry_task(ids["resolved"], by="anna")
            (claimed,) = await store.claim_tasks(locked_by=_OWNER, limit=10)
            await store.finish_task(
                ids["resolved"], locked_by=_OWNER, epoch=claimed.lock_epoch, result=None
            )
            return ids
        finally:
            await store.close()

    return asyncio.run(go())


def test_alerts_are_listed_by_state_with_what_resolved_them(cli: Cli, shared_store: str) -> None:
    ids = alerts_of_every_state(shared_store)

    every = ok_json(cli("alerts", "--json"))["alerts"]
    assert [(a["task_id"], a["state"]) for a in every] == [
        (ids["resolved"], "resolved"),
        (ids["acknowledged"], "acknowledged"),
        (ids["open"], "open"),
    ]
    resolved = every[0]
    assert (resolved["times_raised"], resolved["reason"], resolved["resolved_by"]) == (
        2,
        "card declined again",
        "task processed",
    )
    for state in ("open", "acknowledged", "resolved"):
        (only,) = ok_json(cli("alerts", "--state", state, "--json"))["alerts"]
        assert only["task_id"] == ids[state]
    assert ok_json(cli("alerts", "--open", "--json"))["alerts"] == [every[2]]
    assert ok_json(cli("alerts", "--state", "all", "--json"))["alerts"] == every

    narrow = ok(cli("alerts")).splitlines()
    assert all(len(line) <= 80 for line in narrow), narrow
    cells = [re.split(r"\s{2,}", line.strip()) for line in narrow[:-1]]
    at = cells[0].index("state")
    assert [row[at] for row in cells[1:]] == ["resolved", "acknowledged", "open"]
    wide = [
        re.split(r"\s{2,}", line.strip())
        for line in ok(cli("alerts", columns="200")).splitlines()[:-1]
    ]
    header = ["id", "task", "workflow", "key", "fails", "times", "raised", "state", "by", "reason"]
    assert wide[0] == header
    row = dict(zip(header, wide[1], strict=True))
    assert (row["times"], row["state"], row["by"], row["reason"]) == (
        "2",
        "resolved",
        "task processed",
        "card declined again",
    )
    assert wide[2][-3:] == ["acknowledged", "anna", "card of acknowledged declined"]

    clash = cli("alerts", "--open", "--state", "resolved")
    assert clash.returncode == 2
    assert "--open lists the open alerts: it cannot go with --state resolved" in clash.stderr
    assert cli("alerts", "--state", "closed").returncode == 2
