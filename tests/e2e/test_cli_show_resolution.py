"""`shepherd show TASK` shows the resolution each step was sent with: real processes, SQLite and PostgreSQL.

A worker process runs a workflow whose first call names an entity and whose
second does not. `show` lists the first step's resolution (entity, partition,
resource and its details) in its `resolutions` table and in `--json`, and the
second step has none. After the partition moves, `show` still shows the
resolution the step was sent with.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Cli = Callable[..., subprocess.CompletedProcess[str]]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

#: A workflow with a call for an entity, then one for none.
ENTITY_APP = """
from shepherd import App

app = App(alerts=())


@app.agent("orders.write")
async def write(request):
    return {"written_to": request.resolution.resource.name}


@app.agent("orders.notify")
async def notify(request):
    return {"resolution": request.resolution}


@app.workflow("orders.save")
async def save(ctx, data):
    written = await ctx.call("orders.write", data, entity=data["user"])
    return await ctx.call("orders.notify", written)
"""

DB1 = {"name": "db1", "kind": "sqlite", "info": {"path": "one.db"}, "capacity": None, "rate": None}


@pytest.fixture
def store_env(cli_env: dict[str, str], shared_store: str, cli_dir: Path) -> dict[str, str]:
    """Every command's environment: the shared store; the app module in the working directory."""
    (cli_dir / "entityapp.py").write_text(ENTITY_APP)
    return {**cli_env, "SHEPHERD_STORE": shared_store, "COLUMNS": "120"}


def ok(completed: subprocess.CompletedProcess[str]) -> str:
    assert completed.returncode == 0, (completed.stdout, completed.stderr)
    return completed.stdout


def resolutions_table(shown: str) -> list[list[str]]:
    """The words of each line of `show`'s resolutions table (none: no such table)."""
    if "\nresolutions\n" not in shown:
        return []
    table = shown.split("\nresolutions\n", 1)[1].split("\n\n", 1)[0]
    return [line.split() for line in table.splitlines()]


def test_show_gives_each_step_the_resolution_it_was_sent_with(
    shepherd_cli: Cli, shepherd_process: Any, store_env: dict[str, str]
) -> None:
    def cli(*args: str) -> str:
        return ok(shepherd_cli(*args, env=store_env))

    cli("resources", "add", "db1", "--kind", "sqlite", "--info", '{"path": "one.db"}')
    cli("resources", "add", "db2", "--kind", "sqlite", "--info", '{"path": "two.db"}')
    cli("partitions", "move", "p1", "db1")
    cli("partitions", "assign", "user-1", "p1")
    with shepherd_process("run", "--app", "entityapp:app", env=store_env) as running:
        submitted = json.loads(
            cli(
                "submit",
                "--app",
                "entityapp:app",
                "orders.save",
                '{"user": "user-1"}',
                "--wait",
                "50",
                "--json",
            )
        )
        assert running.terminate() == 0, running.stderr()
    assert submitted["process_state"] == "processed"
    assert submitted["result"] == {"resolution": None}
    task_id = submitted["id"]

    task = json.loads(cli("show", task_id, "--json"))

    written, notified = task["steps"]
    assert written["resolution"] == {"entity": "user-1", "partition": "p1", "resource": DB1}
    assert written["result"] == {"written_to": "db1"}
    assert notified["resolution"] is None
    assert resolutions_table(cli("show", task_id)) == [
        ["seq", "entity", "partition", "resource", "info"],
        ["1", "user-1", "p1", "db1", '{"path":"one.db"}'],
    ]

    cli("partitions", "move", "p1", "db2")

    assert json.loads(cli("show", task_id, "--json"))["steps"][0]["resolution"]["resource"] == DB1
    assert resolutions_table(cli("show", task_id))[1][3] == "db1"


def test_show_of_a_task_without_entities_has_no_resolutions_table(
    shepherd_cli: Cli, put_task: Callable[..., str], cli_env: dict[str, str]
) -> None:
    task_id = put_task("hello")

    shown = ok(shepherd_cli("show", task_id, env=cli_env))

    assert "resolutions" not in shown
    assert resolutions_table(shown) == []
