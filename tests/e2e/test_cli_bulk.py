"""`shepherd retry --all-matching` and `shepherd alerts ack --task | --all-matching`, on both backends.

The commands run in the test's process (`shepherd_cli_in_process`): what they
print and what they store is the point. The tasks in `error` are failed into
it by their owner straight through the store (no worker runs: a retried task
stays `pending`, which is what is checked).
"""

from __future__ import annotations

import asyncio
import getpass
import subprocess
from collections.abc import Callable

import pytest

from shepherd.store import open_store
from support.cli_checks import ok, ok_json, refused
from support.factories import tasks_in_error

Cli = Callable[..., subprocess.CompletedProcess[str]]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

_OWNER = "elsewhere:1:0000/s"


@pytest.fixture
def cli(shepherd_cli_in_process: Cli, cli_env: dict[str, str], shared_store: str) -> Cli:
    """`shepherd ...` on the test's shared store (a SQLite file, or a PostgreSQL database)."""
    env = {**cli_env, "SHEPHERD_STORE": shared_store}

    def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return shepherd_cli_in_process(*args, env=env, stdin=stdin)

    return run


def in_error(url: str, workflow: str, n: int) -> list[str]:
    """`n` tasks of `workflow` failed into `error` by their owner (each stores an alert); their ids."""

    async def go() -> list[str]:
        store = open_store(url)
        await store.open()
        try:
            return await tasks_in_error(
                store, n, workflow=workflow, locked_by=_OWNER, reason=lambda _: "declined"
            )
        finally:
            await store.close()

    return asyncio.run(go())


def states(url: str, ids: list[str]) -> list[str]:
    """The process state of each task, in order."""

    async def go() -> list[str]:
        store = open_store(url)
        await store.open()
        try:
            found = [await store.get_task(task_id) for task_id in ids]
            return [str(t.process_state) if t else "gone" for t in found]
        finally:
            await store.close()

    return asyncio.run(go())


def test_retry_all_matching_asks_lists_and_retries_in_one_action(
    cli: Cli, shared_store: str
) -> None:
    orders = in_error(shared_store, "orders.pay", 3)
    users = in_error(shared_store, "users.sync", 1)

    dry = ok(cli("retry", "--all-matching", "--workflow", "orders.pay", "--dry-run"))
    assert dry.splitlines()[0] == "would retry 3 tasks (in error, workflow orders.pay):"
    assert {line.strip() for line in dry.splitlines()[1:]} == set(orders)
    planned = ok_json(cli("retry", "--all-matching", "--dry-run", "--json"))
    assert (planned["of"], planned["dry_run"]) == (4, True)
    assert sorted(planned["task_ids"]) == sorted([*orders, *users])
    declined = cli("retry", "--all-matching", "--workflow", "orders.pay", stdin="n\n")
    assert declined.returncode != 0
    assert "Retry 3 tasks (in error, workflow orders.pay)? [y/N]" in declined.stderr
    assert states(shared_store, [*orders, *users]) == ["error"] * 4  # nothing changed

    done = ok(
        cli("retry", "--all-matching", "--workflow", "orders.pay", "--by", "anna", stdin="y\n")
    )

    assert done.splitlines()[0].startswith("retried 3 of 3 tasks (bulk action ")
    assert done.splitlines()[0].endswith(", by anna)")
    assert states(shared_store, [*orders, *users]) == ["pending"] * 3 + ["error"]
    shown = ok_json(cli("show", orders[0], "--json"))
    (retried,) = [e["detail"] for e in shown["history"] if e["kind"] == "retried"]
    assert (retried["by"], retried["of"]) == ("anna", 3)
    nothing = ok(cli("retry", "--all-matching", "--workflow", "orders.pay", "--yes"))
    assert nothing.strip() == "no task matches (in error, workflow orders.pay): nothing to do"
    scripted = ok_json(cli("retry", "--all-matching", "--yes", "--json", "--since", "1h"))
    assert (scripted["done"], scripted["done_ids"], scripted["refused"]) == (1, users, [])
    (by_default,) = [
        e["detail"]["by"]
        for e in ok_json(cli("show", users[0], "--json"))["history"]
        if e["kind"] == "retried"
    ]
    assert by_default == getpass.getuser()


def test_retry_takes_exactly_one_of_a_task_or_all_matching(cli: Cli, shared_store: str) -> None:
    (task_id,) = in_error(shared_store, "orders.pay", 1)
    assert "exactly one of TASK or --all-matching" in refused(cli("retry"))
    assert "exactly one of TASK or --all-matching" in refused(
        cli("retry", task_id, "--all-matching")
    )
    assert "go with --all-matching" in refused(cli("retry", task_id, "--dry-run"))
    assert "retry one TASK" in refused(cli("retry", "--all-matching", "--step", "1"))
    assert states(shared_store, [task_id]) == ["error"]
    assert ok(cli("retry", task_id)).strip() == f"task {task_id}: pending"


def test_alerts_ack_by_task_and_all_matching(cli: Cli, shared_store: str) -> None:
    orders = in_error(shared_store, "orders.pay", 3)
    users = in_error(shared_store, "users.sync", 2)

    named = ok(cli("alerts", "ack", "--task", orders[0], "--task", "orders.pay-1", "--by", "anna"))
    assert named.splitlines()[0].startswith(
        "acknowledged the alerts of 2 of 2 tasks (2 alerts; bulk action "
    )
    open_ids = {a["task_id"] for a in ok_json(cli("alerts", "--open", "--json"))["alerts"]}
    assert open_ids == {orders[2], *users}

    dry = ok_json(
        cli("alerts", "ack", "--all-matching", "--workflow", "users.sync", "--dry-run", "--json")
    )
    assert sorted(dry["task_ids"]) == sorted(users)
    done = ok_json(cli("alerts", "ack", "--all-matching", "--yes", "--json"))
    assert (done["action"], done["of"], done["done"], done["alerts"]) == ("acknowledge", 5, 3, 3)
    assert sorted(r["task_id"] for r in done["refused"]) == sorted(orders[:2])
    assert {r["reason"] for r in done["refused"]} == {"no open alert"}
    assert ok_json(cli("alerts", "--open", "--json"))["alerts"] == []
    assert states(shared_store, orders) == ["error"] * 3  # the tasks are not touched

    single = in_error(shared_store, "mail.send", 1)
    (alert,) = ok_json(cli("alerts", "--open", "--json"))["alerts"]
    assert alert["task_id"] == single[0]
    acked = ok_json(cli("alerts", "ack", str(alert["id"]), "--json"))["acknowledged"]
    assert acked["acknowledged_by"] == getpass.getuser()  # --by defaults to the OS user


def test_alerts_ack_refuses_a_mix_or_nothing(cli: Cli, shared_store: str) -> None:
    (task_id,) = in_error(shared_store, "orders.pay", 1)
    for args in (("alerts", "ack"), ("alerts", "ack", "1", "--task", task_id)):
        assert "exactly one of ID, --task TASK or --all-matching" in refused(cli(*args))
    assert "go with --all-matching" in refused(cli("alerts", "ack", "--task", task_id, "--yes"))
    assert "unknown task" in refused(cli("alerts", "ack", "--task", "nope-nope"), 3)
    assert len(ok_json(cli("alerts", "--open", "--json"))["alerts"]) == 1
