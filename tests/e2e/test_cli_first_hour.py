"""What a new user meets in the first hour of the CLI, on SQLite and PostgreSQL.

`submit` without its JSON argument is a usage error; `--app` may come before
the command, like `--store`; a PostgreSQL URL without the `postgres` extra
says how to install it; `show` and `workers` fit 80 columns without cutting a
time of day or a name; `top` counts compensated tasks apart from those in
error. The commands run in the test's process (support.cli_inprocess) but for
the worker and the dashboard, whose process is the point.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from shepherd.core.states import ProcessState
from shepherd.store import open_store
from shepherd.store.contract import NewTask
from support.cli_checks import ok, ok_json, refused
from support.cli_inprocess import run_in_process

Cli = Callable[..., subprocess.CompletedProcess[str]]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

APP = "cliapp:app"
#: The scheduler the tasks put straight into the store are claimed by (no such process runs).
ELSEWHERE = "elsewhere:1:aa/s"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(cli_env: dict[str, str], shared_store: str) -> dict[str, str]:
    """Every command's environment: the test's store, SQLite or PostgreSQL; 80 columns."""
    return {**cli_env, "SHEPHERD_STORE": shared_store, "COLUMNS": "80"}


@pytest.fixture
def cli(shepherd_cli_in_process: Cli, env: dict[str, str]) -> Cli:
    """`shepherd ...` in this process, on the test's store (`env=` adds to its environment)."""

    def run(*args: str, stdin: str | None = None, **extra: str) -> Any:
        return shepherd_cli_in_process(*args, stdin=stdin, env={**env, **extra})

    return run


def put_ended(url: str, states: Sequence[ProcessState]) -> list[str]:
    """Tasks of `hello` that ended in `states`, written straight into the store (put them first)."""

    async def put() -> list[str]:
        store = open_store(url)
        await store.open()
        try:
            ids = []
            for state in states:
                task_id = (await store.submit_task(NewTask(workflow="hello", input={}))).task_id
                (claimed,) = await store.claim_tasks(locked_by=ELSEWHERE, limit=10)
                await store.fail_task(
                    task_id,
                    locked_by=ELSEWHERE,
                    epoch=claimed.lock_epoch,
                    state=state,
                    error={"reason": f"it ended {state}"},
                )
                ids.append(task_id)
            return ids
        finally:
            await store.close()

    return asyncio.run(put())


def listed(cli: Cli) -> list[str]:
    return [task["id"] for task in ok_json(cli("tasks", "--json"))["tasks"]]


# -- submit --------------------------------------------------------------------------
def test_submit_without_its_json_is_a_usage_error_and_submits_nothing(cli: Cli) -> None:
    kept = ok(cli("submit", "--app", APP, "hello", "{}")).strip()

    for extra, stdin in [((), None), (("--key", "K-1"), '{"name": "ann"}'), (("--wait", "5"), "")]:
        message = refused(cli("submit", "--app", APP, "hello", *extra, stdin=stdin))
        assert message.startswith("error: Missing argument 'JSON': the task's input"), message
        assert "'-' reads it from stdin" in message

    assert listed(cli) == [kept]
    read = ok_json(cli("submit", "--app", APP, "hello", "-", "--json", stdin='{"name": "bo"}'))
    assert ok_json(cli("show", read["id"], "--json"))["input"] == {"name": "bo"}
    assert "WORKFLOW JSON" in ok(cli("submit", "--help"))


# -- --app before the command --------------------------------------------------------
#: Every one-shot command that takes --app, with what it needs ({error}: a task in error).
COMMANDS: list[tuple[str, ...]] = [
    ("submit", "hello", "[]"),
    ("tasks",),
    ("show", "{error}"),
    ("retry", "{error}"),
    ("cancel", "{pending}"),
    ("breakers",),
    ("workers",),
    ("purge", "--older-than", "1d"),
    ("alerts",),
    ("top", "--once"),
    ("tokens", "list"),
    ("resources", "list"),
    ("partitions", "list"),
]


def test_every_command_takes_the_app_before_it(cli: Cli, shared_store: str) -> None:
    (error,) = put_ended(shared_store, [ProcessState.ERROR])
    made = {"error": error, "pending": ok(cli("submit", "--app", APP, "hello", "{}")).strip()}

    for command in COMMANDS:
        args = [made[a.strip("{}")] if a.startswith("{") else a for a in command]
        done = cli("--app", APP, *args)
        assert done.returncode == 0, (command, done.stderr)
        # The app given before the command is the one loaded: a missing one is named.
        assert "'nosuch'" in refused(cli("--app", "nosuch:app", *args)), command


def test_the_commands_own_app_wins_then_the_one_before_it_then_the_environment(
    cli: Cli,
) -> None:
    ok(cli("submit", "--app", APP, "hello", "{}"))

    ok(cli("--app", "nosuch:app", "tasks", "--app", APP))
    ok(cli("--app", APP, "tasks", SHEPHERD_APP="nosuch:app"))
    assert "'nosuch'" in refused(cli("tasks", SHEPHERD_APP="nosuch:app"))
    ok(cli("--app", APP, "submit", "hello", "{}", SHEPHERD_APP="nosuch:app"))
    assert "--app MODULE:ATTR" in ok(cli("--help"))
    # A command that takes no app refuses one given before it (--help: nothing would run).
    assert "`shepherd demo` takes no --app" in refused(cli("--app", APP, "demo", "--help"))


@pytest.mark.parametrize(
    "args",
    [("run",), ("worker", "--roles", "agent"), ("dashboard", "--port", "0")],
    ids=lambda args: args[0],
)
def test_long_running_commands_take_the_app_before_them(
    cli: Cli, shepherd_process: Any, env: dict[str, str], args: tuple[str, ...]
) -> None:
    ok(cli("submit", "--app", APP, "hello", "{}"))  # the store exists: the dashboard opens it

    with shepherd_process("--app", APP, *args, env=env) as running:
        assert running.ready_line.startswith("shepherd ready: ")
        assert running.terminate() == 0, running.stderr()


# -- PostgreSQL without its extra ----------------------------------------------------
def test_a_postgresql_url_without_the_extra_says_how_to_install_it(
    cli_dir: Path, cli_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert extras["name"] == "shepherd"
    assert any(p.startswith("psycopg") for p in extras["optional-dependencies"]["postgres"])
    # psycopg cannot be imported, and the PostgreSQL store is imported anew.
    monkeypatch.setitem(sys.modules, "psycopg", None)
    for name in [m for m in sys.modules if m.split(".")[:3] == ["shepherd", "store", "postgres"]]:
        monkeypatch.delitem(sys.modules, name)

    done = run_in_process(
        ["tasks", "--store", "postgresql://shepherd@127.0.0.1:1/shepherd"], cwd=cli_dir, env=cli_env
    )

    assert refused(done, 6) == (
        "error: a PostgreSQL store needs the 'postgres' extra (psycopg is missing): "
        "pip install 'shepherd[postgres]'"
    )


# -- 80 columns ------------------------------------------------------------------------
TIME_OF_DAY = re.compile(r"(?:\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\dZ")


def test_show_and_workers_fit_80_columns_with_times_of_day_and_whole_names(
    cli: Cli, shepherd_process: Any, env: dict[str, str]
) -> None:
    with shepherd_process("worker", "--app", APP, env=env) as running:
        instance = running.ready_line.split(" instance=")[1].split()[0]
        done = ok_json(
            cli("submit", "--app", APP, "hello", '{"name": "ann"}', "--wait", "50", "--json")
        )
        workers = ok(cli("workers"))
        assert running.terminate() == 0, running.stderr()
    shown = ok(cli("show", done["id"]))

    for text in (workers, shown):
        assert max(len(line) for line in text.splitlines()) <= 80, text
        assert "…" not in text.split("\nhistory\n")[0], text
    steps = shown.split("\nsteps\n")[1].split("\n\n")[0].splitlines()
    assert steps[0].split() == [
        "seq",
        "kind",
        "agent",
        "state",
        "agent",
        "tries",
        "complete_by",
        "error",
    ]
    for line, agent in zip(steps[1:3], ("greet", "shout"), strict=True):
        assert line.split()[2:5] == [agent, "completed", "1"], line
        assert re.search(rf" 1  {TIME_OF_DAY.pattern}$", line), line  # its tries, its deadline
    assert steps[3].startswith("task failures: ")
    assert "task failures  0" in shown
    (row,) = [line for line in workers.splitlines() if line.startswith(instance)]
    assert row.split()[1] == "alive"
    roles = re.findall(r"scheduler|agent|supervisor", workers.split(instance, 1)[1])
    assert roles[:3] == ["scheduler", "agent", "supervisor"], workers


# -- top ------------------------------------------------------------------------------
def test_top_counts_compensated_tasks_apart_from_those_in_error(
    cli: Cli, shared_store: str
) -> None:
    put_ended(
        shared_store,
        [ProcessState.COMPENSATED, ProcessState.COMPENSATED, ProcessState.ERROR],
    )

    frame = [" ".join(line.split()) for line in ok(cli("top", "--once")).splitlines()]

    assert "tasks ended, by how" in frame
    assert "over per second processed compensated error cancelled" in frame
    (minute,) = [line for line in frame if line.startswith("last minute ")]
    assert minute.split()[3:] == ["0", "2", "1", "0"]
