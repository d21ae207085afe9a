"""`shepherd alerts` and `shepherd alerts ack`, on SQLite and PostgreSQL.

The commands run in the test's process (`shepherd_cli_in_process`): what they print and
store is the point here, not the process.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Callable

import pytest

from shepherd.core.states import ProcessState
from shepherd.store import open_store
from shepherd.store.contract import NewTask
from support.cli_checks import ok, ok_json, refused

Cli = Callable[..., subprocess.CompletedProcess[str]]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

_OWNER = "elsewhere:1:0000/s"


@pytest.fixture
def cli(shepherd_cli_in_process: Cli, cli_env: dict[str, str], shared_store: str) -> Cli:
    """`shepherd ...` on the test's shared store (a SQLite file, or a PostgreSQL database)."""
    env = {**cli_env, "SHEPHERD_STORE": shared_store}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return shepherd_cli_in_process(*args, env=env)

    return run


def failed_tasks(url: str, keys: list[str]) -> list[str]:
    """One task per key failed into `error` by its owner (each stores an alert); their ids."""

    async def go() -> list[str]:
        store = open_store(url)
        await store.open()
        try:
            ids = []
            for key in keys:
                task = NewTask(workflow="orders.pay", input={}, key=key)
                task_id = (await store.submit_task(task)).task_id
                (claimed,) = await store.claim_tasks(locked_by=_OWNER, limit=10)
                await store.fail_task(
                    task_id,
                    locked_by=_OWNER,
                    epoch=claimed.lock_epoch,
                    state=ProcessState.ERROR,
                    error={"reason": f"card of {key} declined twice"},
                )
                ids.append(task_id)
            return ids
        finally:
            await store.close()

    return asyncio.run(go())


def test_alerts_are_listed_and_acknowledged_from_the_command_line(
    cli: Cli, shared_store: str
) -> None:
    first, second, third = failed_tasks(shared_store, ["A-1", "A-2", "A-3"])

    listed = ok_json(cli("alerts", "--json"))

    assert (listed["count"], listed["more"]) == (3, False)
    assert [a["task_id"] for a in listed["alerts"]] == [third, second, first]
    newest = listed["alerts"][0]
    assert (newest["workflow"], newest["key"], newest["reason"]) == (
        "orders.pay",
        "A-3",
        "card of A-3 declined twice",
    )
    assert (newest["acknowledged_at"], newest["acknowledged_by"]) == (None, None)
    ids = [a["id"] for a in listed["alerts"]]

    done = ok_json(cli("alerts", "ack", str(ids[1]), "--by", "anna", "--json"))["acknowledged"]

    assert (done["id"], done["task_id"], done["acknowledged_by"]) == (ids[1], second, "anna")
    assert done["acknowledged_at"] is not None
    still_open = ok_json(cli("alerts", "--open", "--json"))
    assert [a["task_id"] for a in still_open["alerts"]] == [third, first]
    limited = ok_json(cli("alerts", "--limit", "1", "--json"))
    assert ([a["task_id"] for a in limited["alerts"]], limited["more"]) == ([third], True)

    # A second acknowledgement keeps the first, and says so.
    again = ok(cli("alerts", "ack", str(ids[1]), "--by", "bruno"))
    assert again.strip().startswith(
        f"alert {ids[1]} (task {second}) was already acknowledged by anna"
    )
    assert ok_json(cli("alerts", "--json"))["alerts"][1] == done

    table = ok(cli("alerts"))
    lines = table.splitlines()
    assert all(len(line) <= 80 for line in lines), table
    assert lines[-1] == "3 alerts"
    assert [line.split()[0] for line in lines[1:-1]] == [str(i) for i in ids]
    assert ok(cli("alerts", "--open", "--limit", "1")).splitlines()[-1] == (
        "1 alert shown (more match; raise --limit)"
    )


def test_alerts_of_an_empty_store_and_bad_acknowledgements(cli: Cli, shared_store: str) -> None:
    failed_tasks(shared_store, [])  # the store exists, without alerts
    assert ok(cli("alerts", "--open")).strip() == "no alerts"
    failed_tasks(shared_store, ["B-1"])
    (alert,) = ok_json(cli("alerts", "--json"))["alerts"]

    unknown = cli("alerts", "ack", "999", "--by", "anna", "--json")
    assert refused(unknown) == "error: unknown alert 999 (list them with shepherd alerts)"
    assert json.loads(unknown.stdout)["error"]["type"] == "UnknownAlertError"
    assert "'by' is empty" in refused(cli("alerts", "ack", str(alert["id"]), "--by", " "))
    assert "exactly one of ID, --task TASK or --all-matching" in refused(cli("alerts", "ack"))
    assert "not a valid integer" in refused(cli("alerts", "ack", "first", "--by", "anna"))
    assert "--limit" in refused(cli("alerts", "--limit", "0"))

    # Nothing was acknowledged by any of them.
    assert ok_json(cli("alerts", "--open", "--json"))["alerts"] == [alert]
