"""`shepherd resources ...` and `shepherd partitions ...`, on SQLite and PostgreSQL.

The commands run in the test's process (`shepherd_cli_in_process`): what they
print and store is the point here, not the process. One test runs its command as
a real process, to check the exit code and the JSON error document end to end.
Input refused before the store is opened, and the error document, are checked
on SQLite only; what the store decides, on both backends.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from shepherd import App
from shepherd.core.resources import Resolution, Resource
from support.backends import sqlite_only
from support.cli_checks import ok, ok_json, refused
from support.factories import claimed_task, step_start

Cli = Callable[..., subprocess.CompletedProcess[str]]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

#: An app that declares a resource, for `--app`.
RESOURCE_APP = """
from shepherd import App

app = App(alerts=())
app.resource("orders-db", kind="sqlite", info={"path": "orders.db"}, capacity=3)
"""


@pytest.fixture
def cli(shepherd_cli_in_process: Cli, cli_env: dict[str, str], shared_store: str) -> Cli:
    """`shepherd ...` in this process, on the test's shared store (SQLite or PostgreSQL)."""
    env = {**cli_env, "SHEPHERD_STORE": shared_store}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return shepherd_cli_in_process(*args, env=env)

    return run


@pytest.fixture
def cli_process(shepherd_cli: Cli, cli_env: dict[str, str], shared_store: str) -> Cli:
    """`shepherd ...` as a real process, on the test's shared store."""
    env = {**cli_env, "SHEPHERD_STORE": shared_store}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return shepherd_cli(*args, env=env)

    return run


def state(cli: Cli) -> tuple[Any, Any]:
    """`resources list --json` and `partitions list --json`."""
    return ok_json(cli("resources", "list", "--json")), ok_json(cli("partitions", "list", "--json"))


def test_resources_and_partitions_from_the_command_line(cli: Cli) -> None:
    added = ok_json(
        cli(
            "resources",
            "add",
            "db1",
            "--kind",
            "sqlite",
            "--info",
            '{"path": "one.db"}',
            "--capacity",
            "3",
            "--json",
        )
    )
    assert added == {
        "added": {
            "name": "db1",
            "kind": "sqlite",
            "info": {"path": "one.db"},
            "capacity": 3,
            "rate": None,
        }
    }
    assert ok(cli("resources", "add", "db2", "--kind", "sqlite", "--rate", "2.5")) == (
        "added resource 'db2' (sqlite, rate 2.5/s)\n"
    )
    assert ok(cli("partitions", "move", "p1", "db1")) == (
        "partition 'p1' created on resource 'db1'\n"
    )
    assert ok_json(cli("partitions", "assign", "user-1", "p1", "--json")) == {
        "entity": "user-1",
        "partition": "p1",
        "previous": None,
    }
    ok(cli("partitions", "assign", "user-2", "p1"))

    moved = ok_json(cli("partitions", "move", "p1", "db2", "--json"))

    # Nothing was in flight on db1: it moved at its first look, waiting for nothing.
    assert moved == {
        "partition": "p1",
        "resource": "db2",
        "previous": "db1",
        "entities": 2,
        "waited_for": 0,
        "in_flight": [],
        "now": False,
        "timed_out": False,
    }
    resources, partitions = state(cli)
    assert [r["name"] for r in resources["resources"]] == ["db1", "db2"]
    assert partitions == {
        "partitions": [{"partition": "p1", "resource": "db2", "entities": 2}],
        "version": resources["version"],
    }
    assert resources["version"] == 6  # two adds, a new partition, two assigns, a move
    table = ok(cli("partitions", "list")).splitlines()
    assert table[0].split() == ["partition", "resource", "entities"]
    assert table[1].split() == ["p1", "db2", "2"]
    listed = ok(cli("resources", "list")).splitlines()
    assert listed[1].split() == ["db1", "sqlite", "3", "-", '{"path":"one.db"}']
    assert listed[2].split() == ["db2", "sqlite", "-", "2.5", "{}"]


def test_set_changes_only_what_it_names_and_none_removes_a_limit(cli: Cli) -> None:
    ok(
        cli(
            "resources",
            "add",
            "db1",
            "--kind",
            "sqlite",
            "--info",
            '{"path": "one.db"}',
            "--capacity",
            "3",
            "--rate",
            "4",
        )
    )

    changed = ok_json(cli("resources", "set", "db1", "--capacity", "none", "--rate", "8", "--json"))

    assert changed == {
        "changed": {
            "name": "db1",
            "kind": "sqlite",
            "info": {"path": "one.db"},
            "capacity": None,
            "rate": 8.0,
        }
    }
    ok(cli("resources", "set", "db1", "--info", '{"path": "two.db"}', "--kind", "postgres"))
    (db1,) = ok_json(cli("resources", "list", "--json"))["resources"]
    assert db1 == {
        "name": "db1",
        "kind": "postgres",
        "info": {"path": "two.db"},
        "capacity": None,
        "rate": 8.0,
    }


def test_remove_refuses_a_resource_in_use_then_removes_it(cli: Cli) -> None:
    ok(cli("resources", "add", "db1", "--kind", "sqlite"))
    ok(cli("resources", "add", "db2", "--kind", "sqlite"))
    ok(cli("partitions", "move", "p1", "db1"))

    line = refused(cli("resources", "remove", "db1"))

    assert "resource 'db1' is in use by partition(s) 'p1'" in line
    ok(cli("partitions", "move", "p1", "db2"))
    assert ok(cli("resources", "remove", "db1")) == "removed resource 'db1' (sqlite)\n"
    assert [r["name"] for r in ok_json(cli("resources", "list", "--json"))["resources"]] == ["db2"]


#: Input the command refuses before it opens the store: the same on every backend.
REFUSED_BEFORE_THE_STORE = [
    (("resources", "add", "db9", "--kind", "k", "--info", "{not json"), "malformed JSON"),
    (
        ("resources", "add", "db9", "--kind", "k", "--info", "[1, 2]"),
        "resource 'db9': --info must be a JSON object, not [1,2]",
    ),
    (("resources", "set", "db1", "--info", '{"a": NaN}'), "NaN is not a JSON value"),
    (("resources", "set", "db1", "--capacity", "lots"), "'lots' is not a whole number"),
    (("resources", "set", "db1"), "nothing to change"),
    (
        ("partitions", "move", "p1", "db1", "--timeout", "0"),
        "move of partition 'p1': timeout must be above 0 seconds and finite, not 0.0",
    ),
    (("partitions", "move", "p1", "db1", "--timeout", "nan"), "finite, not nan"),
    (("partitions", "move", "p1", "db1", "--timeout", "soon"), "'soon' is not a valid float"),
    (
        ("partitions", "move", "p1", "db1", "--now", "--timeout", "5"),
        "move of partition 'p1': a move made at once (now) waits for nothing",
    ),
]
#: Input refused once the store is open, by the store's operation: on both backends.
REFUSED_BY_THE_STORE = [
    (
        ("resources", "add", "db9", "--kind", "k", "--capacity", "0"),
        "resource 'db9': capacity must be at least 1, not 0",
    ),
    (("resources", "set", "db1", "--rate", "-2"), "resource 'db1': rate must be above 0"),
    (("resources", "add", "db1", "--kind", "sqlite"), "resource 'db1' exists already"),
    (("resources", "set", "nope", "--capacity", "2"), "unknown resource 'nope'"),
    (("resources", "remove", "nope"), "unknown resource 'nope'"),
    (("partitions", "move", "p1", "nope"), "unknown resource 'nope' (for partition 'p1')"),
    (("partitions", "move", "p9", "db1", "--now"), "unknown partition 'p9'"),
    (
        ("partitions", "assign", "user-1", "nope"),
        "unknown partition 'nope' (for entity 'user-1')",
    ),
    (("partitions", "assign", " user-1", "p1"), "entity name ' user-1' must be non-empty"),
]


def _ids(value: Any) -> str:
    return value if isinstance(value, str) else "-".join(value[:3])


def refused_and_nothing_changed(cli: Cli, args: tuple[str, ...], message: str) -> None:
    """With db1 and p1 in the store, `args` exits 2 naming `message`; the store is as it was."""
    ok(cli("resources", "add", "db1", "--kind", "sqlite", "--capacity", "3"))
    ok(cli("partitions", "move", "p1", "db1"))

    line = refused(cli(*args))

    assert message in line
    db1 = {"name": "db1", "kind": "sqlite", "info": {}, "capacity": 3, "rate": None}
    p1 = {"partition": "p1", "resource": "db1", "entities": 0}
    assert state(cli) == ({"resources": [db1], "version": 2}, {"partitions": [p1], "version": 2})


@pytest.mark.parametrize(("args", "message"), REFUSED_BY_THE_STORE, ids=_ids)
def test_bad_input_exits_2_naming_it_and_changes_nothing(
    cli: Cli, args: tuple[str, ...], message: str
) -> None:
    refused_and_nothing_changed(cli, args, message)


@pytest.mark.parametrize(("args", "message"), REFUSED_BEFORE_THE_STORE, ids=_ids)
@sqlite_only("shared_store")
def test_input_refused_before_the_store_exits_2_naming_it_and_changes_nothing(
    cli: Cli, args: tuple[str, ...], message: str
) -> None:
    refused_and_nothing_changed(cli, args, message)


@sqlite_only("shared_store")  # the error document is drawn the same whatever the store
def test_a_failure_with_json_prints_an_error_document(cli_process: Cli) -> None:
    completed = cli_process("partitions", "move", "p1", "nope", "--json")

    assert completed.returncode == 2
    error = json.loads(completed.stdout)["error"]
    assert (error["type"], error["exit_code"]) == ("UnknownResourceError", 2)
    assert "unknown resource 'nope'" in error["message"]


def test_unassign_takes_an_entity_out_of_its_partition(cli: Cli) -> None:
    ok(cli("resources", "add", "db1", "--kind", "sqlite"))
    ok(cli("partitions", "move", "p1", "db1"))
    ok(cli("partitions", "assign", "user-1", "p1"))

    assert ok(cli("partitions", "unassign", "user-1")) == (
        "entity 'user-1' taken out of partition 'p1'\n"
    )
    assert ok_json(cli("partitions", "list", "--json"))["partitions"][0]["entities"] == 0
    assert ok(cli("partitions", "unassign", "user-1")) == "entity 'user-1' was in no partition\n"


def test_an_app_creates_its_declared_resources_and_keeps_an_operators_change(
    cli: Cli, cli_dir: Path
) -> None:
    (cli_dir / "resapp.py").write_text(RESOURCE_APP)
    ok(cli("resources", "add", "api", "--kind", "http"))  # the store exists, without orders-db
    # A command that reads writes nothing, not even the app's declarations...
    (only,) = ok_json(cli("resources", "list", "--app", "resapp:app", "--json"))["resources"]
    assert only["name"] == "api"
    # ... one that may create the store opens the app as its own, declarations included.
    ok(cli("resources", "add", "cache", "--kind", "redis", "--app", "resapp:app"))

    listed = ok_json(cli("resources", "list", "--app", "resapp:app", "--json"))["resources"]
    declared = {r["name"]: r for r in listed}["orders-db"]
    assert declared == {
        "name": "orders-db",
        "kind": "sqlite",
        "info": {"path": "orders.db"},
        "capacity": 3,
        "rate": None,
    }

    ok(cli("resources", "set", "orders-db", "--capacity", "10", "--app", "resapp:app"))
    ok(cli("resources", "add", "logs", "--kind", "http", "--app", "resapp:app"))  # declares again
    listed = ok_json(cli("resources", "list", "--app", "resapp:app", "--json"))["resources"]
    assert {r["name"]: r for r in listed}["orders-db"]["capacity"] == 10


def running_step(store_url: str) -> str:
    """Start a step for user-1, resolved to p1 on db1, in a task claimed by no live process: its id."""

    async def start() -> str:
        async with App(store_url, alerts=()) as app:
            task = await claimed_task(app.store, locked_by="gone")
            where = Resolution(
                entity="user-1",
                partition="p1",
                resource=Resource(name="db1", kind="sqlite", info={}),
            )
            await app.store.start_step(replace(step_start(task, agent="write"), resolution=where))
            return task.id

    return asyncio.run(start())


def test_a_move_waits_for_its_steps_in_flight_or_says_which_were(
    cli: Cli, shared_store: str
) -> None:
    ok(cli("resources", "add", "db1", "--kind", "sqlite"))
    ok(cli("resources", "add", "db2", "--kind", "sqlite"))
    ok(cli("partitions", "move", "p1", "db1"))
    ok(cli("partitions", "assign", "user-1", "p1"))
    task_id = running_step(shared_store)

    # The step never ends (its process is gone): the timeout passes, and it moves anyway.
    timed_out = cli("partitions", "move", "p1", "db2", "--timeout", "0.3")

    assert timed_out.returncode == 5, timed_out.stderr
    assert timed_out.stdout == (
        "partition 'p1' moved from resource 'db1' to 'db2' (1 entity, after the timeout)\n"
        "1 step still in flight on 'db1' (they keep the resource they were sent to):\n"
        f"  task {task_id} step 1 (write, attempt 1)\n"
    )
    # Back to db1, where nothing is in flight: at once. Then --now, with the step in flight.
    assert ok(cli("partitions", "move", "p1", "db1")) == (
        "partition 'p1' moved from resource 'db2' to 'db1' (1 entity)\n"
    )
    moved = ok_json(cli("partitions", "move", "p1", "db2", "--now", "--json"))
    assert moved == {
        "partition": "p1",
        "resource": "db2",
        "previous": "db1",
        "entities": 1,
        "waited_for": 0,
        "in_flight": [{"task_id": task_id, "seq": 1, "agent": "write", "attempt": 1}],
        "now": True,
        "timed_out": False,
    }
    partitions = ok_json(cli("partitions", "list", "--json"))["partitions"]
    assert partitions == [{"partition": "p1", "resource": "db2", "entities": 1}]
