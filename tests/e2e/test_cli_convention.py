"""The convention every `shepherd` command follows, run for real.

The app is `--app MODULE:ATTR` or SHEPHERD_APP, never an argument; the store is
`--store URL` or SHEPHERD_STORE; each failure has its own exit code; with
`--json` a failure is also a JSON document on stdout.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from shepherd.core.states import ProcessState
from support.processes import as_from_a_terminal

Cli = Callable[..., subprocess.CompletedProcess[str]]
PutTask = Callable[..., str]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

APP = "cliapp:app"
HINT = "pass the app as --app MODULE:ATTR"
REQUIRED = "--app MODULE:ATTR is required (or set SHEPHERD_APP)"


def failed(completed: subprocess.CompletedProcess[str], code: int) -> str:
    """The one `error:` line of a command that exited `code`."""
    assert completed.returncode == code, (completed.returncode, completed.stdout, completed.stderr)
    lines = completed.stderr.splitlines()
    assert len(lines) == 1, completed.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in completed.stderr
    return lines[0]


def error_document(completed: subprocess.CompletedProcess[str], code: int) -> dict[str, Any]:
    """The `{"error": ...}` document a `--json` command printed on stdout as it failed."""
    line = failed(completed, code)
    document: dict[str, Any] = json.loads(completed.stdout)["error"]
    assert document["exit_code"] == code
    assert line == f"error: {document['message']}"
    return document


# -- --app and SHEPHERD_APP --------------------------------------------------------
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
]


@pytest.mark.parametrize("given", ["option", "env"])
@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_every_command_takes_the_app_as_an_option_or_from_the_environment(
    shepherd_cli: Cli,
    cli_env: dict[str, str],
    put_task: PutTask,
    command: tuple[str, ...],
    given: str,
) -> None:
    made = {
        "error": put_task("hello", ProcessState.ERROR),
        "pending": put_task("hello", ProcessState.PENDING),
    }
    args = [made.get(arg.strip("{}"), arg) if arg.startswith("{") else arg for arg in command]
    if given == "option":
        completed = shepherd_cli(*args, "--app", APP)
    else:
        completed = shepherd_cli(*args, env={**cli_env, "SHEPHERD_APP": APP})

    assert completed.returncode == 0, completed.stderr


@pytest.mark.parametrize("given", ["option", "env"])
@pytest.mark.parametrize("command", ["run", "worker"])
def test_run_and_worker_take_the_app_as_an_option_or_from_the_environment(
    shepherd_process: Any, cli_env: dict[str, str], command: str, given: str
) -> None:
    args = (command, "--app", APP) if given == "option" else (command,)
    env = {**cli_env, "SHEPHERD_APP": APP} if given == "env" else None
    with shepherd_process(*args, env=env) as running:
        assert running.ready_line.startswith("shepherd ready: ")
        assert running.terminate() == 0, running.stderr()


def test_the_app_supplies_the_store_of_read_commands(
    shepherd_cli: Cli, cli_env: dict[str, str], cli_dir: Path
) -> None:
    (cli_dir / "ownstore.py").write_text(
        "from shepherd import App\n"
        "app = App(store='sqlite:///own.db', alerts=())\n"
        "@app.workflow('noop')\n"
        "async def noop(ctx, data):\n"
        "    return data\n"
    )
    env = {k: v for k, v in cli_env.items() if k != "SHEPHERD_STORE"}
    submitted = shepherd_cli("submit", "--app", "ownstore:app", "noop", "{}", env=env)
    assert submitted.returncode == 0, submitted.stderr

    listed = shepherd_cli("tasks", "--app", "ownstore:app", "--json", env=env)

    assert listed.returncode == 0, listed.stderr
    assert [t["id"] for t in json.loads(listed.stdout)["tasks"]] == [submitted.stdout.strip()]
    assert (cli_dir / "own.db").exists()
    # No app and no store: the default sqlite:///shepherd.db, which does not exist.
    assert "no SQLite store" in failed(shepherd_cli("tasks", env=env), 6)


@pytest.mark.parametrize(
    "args",
    [
        ("run", APP),
        ("worker", APP, "--roles", "agent"),
        ("tasks", APP),
        ("breakers", APP),
        ("workers", APP),
        ("show", APP, "01a2b3c4"),
        ("submit", "--app", APP, APP, "hello", "{}"),
    ],
    ids=lambda args: args[0],
)
def test_an_app_given_as_an_argument_is_refused_with_a_hint(
    shepherd_cli: Cli, args: tuple[str, ...]
) -> None:
    message = failed(shepherd_cli(*args), 2)

    assert "unexpected extra argument" in message
    assert f"{HINT} (--app {APP})" in message


@pytest.mark.parametrize(
    "args", [("run",), ("worker", "--roles", "agent"), ("submit", "hello", "{}")], ids=str
)
def test_commands_that_run_the_app_require_it(shepherd_cli: Cli, args: tuple[str, ...]) -> None:
    assert REQUIRED in failed(shepherd_cli(*args), 2)


def test_submit_with_the_app_where_the_workflow_goes_says_so(shepherd_cli: Cli) -> None:
    message = failed(shepherd_cli("submit", APP, "hello"), 2)

    assert REQUIRED in message
    assert f"{HINT} (--app {APP})" in message


# -- exit codes and JSON failures ----------------------------------------------------
def test_a_usage_error_exits_2_and_is_a_json_document_with_json(shepherd_cli: Cli) -> None:
    document = error_document(shepherd_cli("tasks", "--state", "finished", "--json"), 2)

    assert document["type"] == "BadParameter"
    assert "'finished'" in document["message"]


def test_an_unknown_task_exits_3_and_is_a_json_document_with_json(
    shepherd_cli: Cli, put_task: PutTask
) -> None:
    put_task()

    document = error_document(shepherd_cli("show", "no-such-task", "--json"), 3)

    assert document == {
        "type": "UnknownTaskError",
        "message": "unknown task 'no-such-task'",
        "exit_code": 3,
        "task_id": "no-such-task",
    }


def test_waiting_for_a_task_that_ended_badly_exits_4(shepherd_cli: Cli, put_task: PutTask) -> None:
    task_id = put_task(
        "hello", ProcessState.COMPENSATED, key="A-1", error={"reason": "card declined"}
    )
    submit = ("submit", "--app", APP, "hello", "{}", "--key", "A-1", "--wait", "30")

    plain = shepherd_cli(*submit)
    as_json = shepherd_cli(*submit, "--json")

    assert f"task {task_id} ended compensated: card declined" in failed(plain, 4)
    assert plain.stdout.strip() == task_id
    document = error_document(as_json, 4)
    assert document["type"] == "TaskFailedError"
    assert (document["task_id"], document["process_state"]) == (task_id, "compensated")
    assert document["task_error"] == {"reason": "card declined"}


def test_a_wait_that_times_out_exits_5_and_says_no_worker_is_alive(shepherd_cli: Cli) -> None:
    plain = shepherd_cli("submit", "--app", APP, "hello", "{}", "--wait", "0.2")
    as_json = shepherd_cli("submit", "--app", APP, "hello", "{}", "--wait", "0.2", "--json")

    task_id = plain.stdout.strip()
    assert failed(plain, 5) == (
        f"error: task {task_id} did not end within 0.2s; 0 worker processes are alive: "
        f"start one with `shepherd run --app {APP}`"
    )
    document = error_document(as_json, 5)
    assert document["type"] == "WaitTimeoutError"
    assert document["workers_alive"] == 0
    assert document["message"].startswith(f"task {document['task_id']} did not end within 0.2s")


def test_a_wait_that_times_out_counts_the_live_workers(
    shepherd_cli: Cli, shepherd_process: Any
) -> None:
    with shepherd_process("worker", "--app", APP, "--roles", "supervisor") as supervisor:
        instance = supervisor.ready_line.split(" instance=")[1].split()[0]
        deadline = time.monotonic() + 60
        while not any(
            w["instance"] == instance and w["state"] == "alive"
            for w in json.loads(shepherd_cli("workers", "--json").stdout)
        ):
            assert time.monotonic() < deadline, "the worker never registered"
        waited = shepherd_cli("submit", "--app", APP, "hello", "{}", "--wait", "0.2")
        assert supervisor.terminate() == 0, supervisor.stderr()

    assert failed(waited, 5).endswith(
        "; 1 worker process is alive, but none runs the scheduler or the agent role "
        "(see `shepherd workers`)"
    )


def test_a_store_that_is_unavailable_exits_6(shepherd_cli: Cli, tmp_path: Path) -> None:
    missing = f"sqlite:///{tmp_path}/missing.db"

    document = error_document(shepherd_cli("tasks", "--store", missing, "--json"), 6)

    assert document["type"] == "StoreNotFoundError"  # not retried: nothing will appear there
    assert "missing.db" in document["message"]
    assert "missing.db" in failed(shepherd_cli("show", "abcd", "--store", missing), 6)


def test_an_interrupted_wait_exits_130(
    cli_dir: Path, cli_env: dict[str, str], shepherd_cli: Cli
) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "shepherd", "submit", "--app", APP, "hello", "{}", "--wait", "600"],
        cwd=cli_dir,
        env=cli_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=as_from_a_terminal,
    )
    try:
        deadline = time.monotonic() + 60
        while (
            not (cli_dir / "shepherd.db").exists()
            or not json.loads(shepherd_cli("tasks", "--json").stdout)["tasks"]
        ):
            assert time.monotonic() < deadline, "the task was never submitted"
            assert process.poll() is None, process.communicate()
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()

    assert process.returncode == 130, (out, err)
    assert err.splitlines()[-1] == "error: interrupted"


# -- logging -------------------------------------------------------------------------
def test_run_takes_a_level_per_logger(shepherd_process: Any) -> None:
    args = ("--log-level-for", "httpx=info", "--log-level-for", "shepherd.store=DEBUG")
    with shepherd_process("run", "--app", APP, "--log-level", "warning", *args) as running:
        assert running.terminate() == 0, running.stderr()
