"""The `shepherd` command line: submit, list, run/worker, operate, one-line errors.

Submitting, listing and the one-line errors run in the test's process
(`shepherd_cli_in_process`, as `cli`): what a command prints and stores is the
point there. Running tasks uses real processes (`shepherd_cli`, `shepherd_process`).
The convention itself (--app everywhere, exit codes, JSON on failure, finding
a task, fitted tables) is tested in test_cli_convention.py and test_cli_lookup.py.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Cli = Callable[..., subprocess.CompletedProcess[str]]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

APP = "cliapp:app"


@pytest.fixture
def cli(shepherd_cli_in_process: Cli) -> Cli:
    """`shepherd ...` run in this process (support.cli_inprocess)."""
    return shepherd_cli_in_process


def ok_json(completed: subprocess.CompletedProcess[str]) -> Any:
    """The JSON a successful command printed."""
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


def user_error(completed: subprocess.CompletedProcess[str], code: int = 2) -> str:
    """The one-line message of a command that failed with exit `code` (2: a user error)."""
    assert completed.returncode == code, (completed.stdout, completed.stderr)
    lines = completed.stderr.splitlines()
    assert len(lines) == 1, completed.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in completed.stderr
    return lines[0]


def submit(cli: Cli, workflow: str, data: str = "{}", *extra: str) -> str:
    """Submit a task and return its id."""
    completed = cli("submit", "--app", APP, workflow, data, *extra)
    assert completed.returncode == 0, completed.stderr
    return completed.stdout.strip()


def wait_state(cli: Cli, task_id: str, state: str, timeout: float = 60.0) -> dict[str, Any]:
    """Poll `shepherd show --json` (each poll a real command) until the task is in `state`."""
    deadline = time.monotonic() + timeout
    seen = None
    while time.monotonic() < deadline:
        task: dict[str, Any] = ok_json(cli("show", task_id, "--json"))
        seen = task["process_state"]
        if seen == state:
            return task
    pytest.fail(f"task {task_id} still {seen}, not {state}, after {timeout} s")


def task_ids(cli: Cli) -> list[str]:
    return [task["id"] for task in ok_json(cli("tasks", "--json"))["tasks"]]


# -- submit and list -------------------------------------------------------------
def test_submit_prints_an_id_and_tasks_lists_it_pending(cli: Cli) -> None:
    task_id = submit(cli, "hello", '{"name": "ann"}')

    listed = ok_json(cli("tasks", "--json"))

    assert [(t["id"], t["workflow"], t["process_state"]) for t in listed["tasks"]] == [
        (task_id, "hello", "pending")
    ]
    assert (listed["count"], listed["more"]) == (1, False)
    assert listed["tasks"][0]["input"] == {"name": "ann"}
    table = cli("tasks", "--app", APP, "--state", "pending")
    assert table.returncode == 0, table.stderr
    assert task_id in table.stdout
    assert "state" in table.stdout.splitlines()[0]
    assert table.stdout.splitlines()[-1] == "1 task"
    assert ok_json(cli("tasks", "--state", "processed,error", "--json")) == {
        "tasks": [],
        "count": 0,
        "more": False,
    }


def test_submit_json_and_stdin(cli: Cli) -> None:
    printed = ok_json(cli("submit", "--app", APP, "hello", "-", "--json", stdin='{"name": "bo"}'))

    task = ok_json(cli("show", printed["id"], "--json"))
    assert task["input"] == {"name": "bo"}


def test_submit_with_the_same_key_twice_gives_one_task(cli: Cli) -> None:
    first = submit(cli, "hello", '{"name": "ann"}', "--key", "order-1")
    second = submit(cli, "hello", '{"name": "ann"}', "--key", "order-1")

    assert first == second
    assert task_ids(cli) == [first]


def test_unknown_workflow_is_refused_and_creates_nothing(cli: Cli) -> None:
    existing = submit(cli, "hello", '{"name": "ann"}')

    message = user_error(cli("submit", "--app", APP, "nope", "{}"))

    assert "unknown workflow 'nope'" in message
    assert task_ids(cli) == [existing]


@pytest.mark.parametrize("text", ['{"name": ', "{'name': 1}", "NaN", ""])
def test_malformed_json_is_refused_and_creates_nothing(
    cli: Cli, cli_store_url: str, text: str
) -> None:
    message = user_error(cli("submit", "--app", APP, "hello", text))

    assert "malformed JSON" in message
    assert not Path(cli_store_url.removeprefix("sqlite:///")).exists()


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ("missing_module:app", "'missing_module'"),
        ("cliapp:nothing", "'nothing'"),
        ("cliapp:not_an_app", "is an int, not a shepherd App"),
    ],
)
def test_an_app_that_cannot_be_found_is_named(cli: Cli, spec: str, named: str) -> None:
    assert named in user_error(cli("submit", "--app", spec, "hello", "{}"))
    assert named in user_error(cli("run", "--app", spec))
    assert named in user_error(cli("tasks", "--app", spec))


# -- stores ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "named", "code"),
    [
        ("sqlite:////nonexistent-dir/x.db", "/nonexistent-dir", 6),
        ("mysql://host/db", "'mysql'", 2),
    ],
)
@pytest.mark.parametrize(
    "command",
    [("submit", "--app", APP, "hello", "{}"), ("tasks",), ("run", "--app", APP)],
)
def test_a_store_that_cannot_be_opened_is_one_line(
    cli: Cli, url: str, named: str, code: int, command: tuple[str, ...]
) -> None:
    assert named in user_error(cli(*command, "--store", url), code)
    assert named in user_error(cli("--store", url, *command), code)


def test_store_option_overrides_the_environment(cli: Cli, cli_dir: Path) -> None:
    other = f"sqlite:///{cli_dir / 'other.db'}"
    submit(cli, "hello", "{}")

    task_id = submit(cli, "hello", "{}", "--store", other)

    listed = ok_json(cli("--store", other, "tasks", "--json"))
    assert [task["id"] for task in listed["tasks"]] == [task_id]
    assert task_id not in task_ids(cli)


# -- operator errors -----------------------------------------------------------------
@pytest.mark.parametrize("command", ["show", "retry", "cancel"])
def test_an_unknown_task_is_refused(cli: Cli, command: str) -> None:
    submit(cli, "hello", "{}")

    assert "unknown task 'no-such-task'" in user_error(cli(command, "no-such-task"), 3)


def test_retry_of_a_task_not_in_error_is_refused(cli: Cli) -> None:
    task_id = submit(cli, "hello", "{}")

    message = user_error(cli("retry", task_id))

    assert f"cannot retry task {task_id}: it is pending" in message
    assert ok_json(cli("show", task_id, "--json"))["process_state"] == "pending"


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("worker", "--app", APP, "--roles", "scheduler,bogus"), "'bogus'"),
        (("tasks", "--state", "finished"), "'finished'"),
        (("submit", "--app", APP), "WORKFLOW"),
        (("tasks", "--limit", "0"), "--limit"),
        (("submit", "--app", APP, "hello", "--wait", "-1"), "--wait"),
        (("tasks", "--since", "soon"), "'soon' is not a duration"),
        (("run", "--app", APP, "--log-level-for", "httpx"), "'httpx' is not NAME=LEVEL"),
        (("run", "--app", APP, "--log-level-for", "httpx=loud"), "unknown level 'loud'"),
        (("worker", "--app", APP, "--log-level", "loud"), "--log-level"),
    ],
)
def test_usage_errors_are_one_line(cli: Cli, args: tuple[str, ...], named: str) -> None:
    assert named in user_error(cli(*args))


def test_help_works(cli: Cli) -> None:
    completed = cli("--help")

    assert completed.returncode == 0
    for command in ("run", "worker", "submit", "tasks", "show", "retry", "cancel", "demo"):
        assert f"  {command}" in completed.stdout
    for command in ("run", "worker", "submit", "tasks", "show", "workers", "purge"):
        helped = cli(command, "--help")
        assert helped.returncode == 0, helped.stderr
        assert "--app MODULE:ATTR" in helped.stdout
        assert "--store URL" in helped.stdout


# -- running -------------------------------------------------------------------------
def test_run_completes_a_submitted_task(shepherd_cli: Cli, shepherd_process: Any) -> None:
    task_id = submit(shepherd_cli, "hello", '{"name": "ann"}')

    with shepherd_process("run", "--app", APP) as running:
        assert running.ready_line.startswith(
            "shepherd ready: roles=scheduler,agent,supervisor instance="
        )
        task = wait_state(shepherd_cli, task_id, "processed")
        assert running.terminate() == 0, running.stderr()

    assert task["result"] == {"shouted": "HELLO ANN"}
    assert [(s["seq"], s["agent"], s["state"]) for s in task["steps"]] == [
        (1, "greet", "completed"),
        (2, "shout", "completed"),
    ]
    kinds = [event["kind"] for event in task["history"]]
    assert kinds[0] == "received"
    assert kinds[-1] == "processed"
    shown = shepherd_cli("show", task_id)
    assert shown.returncode == 0, shown.stderr
    assert "greet" in shown.stdout
    assert "processed" in shown.stdout


def test_specialised_workers_and_submit_wait(shepherd_cli: Cli, shepherd_process: Any) -> None:
    with (
        shepherd_process("worker", "--app", APP, "--roles", "supervisor,scheduler") as schedulers,
        shepherd_process("worker", "--app", APP, "--roles", "agent") as agents,
    ):
        assert " roles=scheduler,supervisor " in schedulers.ready_line
        assert " roles=agent " in agents.ready_line
        completed = shepherd_cli(
            "submit", "--app", APP, "hello", '{"name": "cy"}', "--wait", "50", "--json"
        )
        assert schedulers.terminate() == 0, schedulers.stderr()
        assert agents.terminate() == 0, agents.stderr()

    printed = ok_json(completed)
    assert printed["process_state"] == "processed"
    assert printed["result"] == {"shouted": "HELLO CY"}


def test_a_task_in_error_can_be_retried_and_cancelled(
    shepherd_cli: Cli, shepherd_process: Any
) -> None:
    with shepherd_process("run", "--app", APP) as running:
        waited = shepherd_cli("submit", "--app", APP, "broken", "{}", "--wait", "50")
        assert "ended error: workflow raised RuntimeError: boom" in user_error(waited, 4)
        task_id = waited.stdout.strip()
        failed = wait_state(shepherd_cli, task_id, "error")
        assert "workflow raised RuntimeError: boom" in failed["error"]["reason"]
        listed = shepherd_cli("tasks", "--state", "error")
        assert task_id in listed.stdout
        assert "RuntimeError: boom" in listed.stdout

        retried = shepherd_cli("retry", task_id)
        assert retried.returncode == 0, retried.stderr
        assert retried.stdout.strip() == f"task {task_id}: pending"
        wait_state(shepherd_cli, task_id, "error")  # the workflow still raises

        cancelled = shepherd_cli("cancel", task_id, "--json")
        assert ok_json(cancelled)["process_state"] == "compensating"
        wait_state(shepherd_cli, task_id, "cancelled")
        assert running.terminate() == 0, running.stderr()

    assert "cannot cancel" in user_error(shepherd_cli("cancel", task_id))


def test_resubmitting_a_failed_step_with_a_new_payload_finishes_the_task(
    shepherd_cli: Cli, shepherd_process: Any
) -> None:
    with shepherd_process("run", "--app", APP) as running:
        task_id = submit(shepherd_cli, "deliver", '{"parcel": 7}')
        failed = wait_state(shepherd_cli, task_id, "error")
        assert "the carrier wants an address" in json.dumps(failed["error"])
        assert "step_gave_up" in [event["kind"] for event in failed["history"]]

        retried = shepherd_cli(
            "retry", task_id, "--step", "1", "--payload", '{"parcel": 7, "address": "Quay 4"}'
        )
        assert retried.returncode == 0, retried.stderr
        assert retried.stdout.strip() == f"task {task_id}: pending"
        done = wait_state(shepherd_cli, task_id, "processed")
        assert running.terminate() == 0, running.stderr()

    assert done["result"] == {"shipped_to": "Quay 4"}
    assert [(s["seq"], s["state"], s["request"]) for s in done["steps"]] == [
        (1, "completed", {"parcel": 7, "address": "Quay 4"})
    ]
    assert "retried" in [event["kind"] for event in done["history"]]
