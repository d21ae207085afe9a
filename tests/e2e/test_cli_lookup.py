"""Finding tasks from the command line: show by id, prefix or key; list with filters and a
count; tables that fit the terminal; the traceback of a failure.

The commands run in the test's process (`shepherd_cli_in_process`): what they print is
the point here; test_cli_convention.py runs the exit codes as real processes."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from shepherd.core.states import ProcessState

Cli = Callable[..., subprocess.CompletedProcess[str]]
PutTask = Callable[..., str]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


@pytest.fixture
def cli(shepherd_cli_in_process: Cli) -> Cli:
    """`shepherd ...` run in this process (support.cli_inprocess)."""
    return shepherd_cli_in_process


def ok(completed: subprocess.CompletedProcess[str]) -> str:
    assert completed.returncode == 0, (completed.stdout, completed.stderr)
    return completed.stdout


def shown_id(cli: Cli, *args: str) -> str:
    task: dict[str, Any] = json.loads(ok(cli("show", *args, "--json")))
    return str(task["id"])


def failed(completed: subprocess.CompletedProcess[str], code: int) -> str:
    assert completed.returncode == code, (completed.returncode, completed.stdout, completed.stderr)
    (line,) = completed.stderr.splitlines()
    return line


def listed(cli: Cli, *args: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(ok(cli("tasks", "--json", *args)))
    return document


def shortest_unique_prefix(task_id: str, others: list[str]) -> str:
    for n in range(4, len(task_id) + 1):
        if not any(other.startswith(task_id[:n]) for other in others):
            return task_id[:n]
    raise AssertionError(f"{task_id} is a prefix of another id")


# -- show, retry, cancel: TASK -------------------------------------------------------
def test_show_finds_a_task_by_id_by_unique_prefix_and_by_key(cli: Cli, put_task: PutTask) -> None:
    first = put_task("hello", key="order-7")
    second = put_task("hello")
    prefix = shortest_unique_prefix(second, [first])
    common = next((first[:n] for n in range(len(first), 0, -1) if second.startswith(first[:n])), "")

    assert shown_id(cli, first) == first
    assert shown_id(cli, prefix) == second
    assert shown_id(cli, prefix.upper()) == second
    assert shown_id(cli, "order-7") == first
    assert len(common) >= 4  # ids begin with the time: two made together share a prefix
    message = failed(cli("show", common), 2)
    assert f"task id prefix {common!r} matches several tasks" in message
    assert first in message
    assert second in message
    assert "unknown task" in failed(cli("show", first[:3]), 3)  # too short a prefix


def test_a_key_used_by_several_workflows_needs_the_workflow(cli: Cli, put_task: PutTask) -> None:
    hello = put_task("hello", key="K-1")
    deliver = put_task("deliver", key="K-1")

    message = failed(cli("show", "K-1"), 2)

    assert "key 'K-1' names tasks of several workflows" in message
    assert f"hello {hello}" in message
    assert f"deliver {deliver}" in message
    assert "--workflow NAME" in message
    assert shown_id(cli, "K-1", "--workflow", "deliver") == deliver
    assert shown_id(cli, "K-1", "--workflow", "hello") == hello


def test_retry_and_cancel_find_the_task_by_key_and_by_prefix(cli: Cli, put_task: PutTask) -> None:
    failing = put_task("hello", ProcessState.ERROR, key="order-9")
    waiting = put_task("hello")

    retried = ok(cli("retry", "order-9"))
    cancelled = ok(cli("cancel", shortest_unique_prefix(waiting, [failing])))

    assert retried.strip() == f"task {failing}: pending"
    assert cancelled.strip() == f"task {waiting}: compensating"


def test_show_prints_the_traceback_of_a_failure(cli: Cli, put_task: PutTask) -> None:
    traceback = (
        "Traceback (most recent call last):\n"
        '  File "shop.py", line 12, in charge\n'
        "    raise RuntimeError('boom')\n"
        "RuntimeError: boom\n"
    )
    task_id = put_task(
        "hello",
        ProcessState.ERROR,
        error={
            "reason": "step 1 (charge) raised RuntimeError: boom",
            "type": "RuntimeError",
            "seq": 1,
            "agent": "charge",
            "traceback": traceback,
        },
    )

    lines = ok(cli("show", task_id)).splitlines()

    assert "step 1 (charge) raised RuntimeError: boom" in " ".join(lines)
    heading = lines.index("traceback of the task's error (step 1, charge)")
    assert lines[heading + 1 :] == traceback.splitlines()


# -- tasks: filters and the count ----------------------------------------------------
def test_tasks_filters_combine_and_the_count_follows(cli: Cli, put_task: PutTask) -> None:
    now = datetime.now(UTC)
    failed_ = put_task("hello", ProcessState.ERROR, at=now - timedelta(seconds=2))
    undone = put_task("deliver", ProcessState.COMPENSATED, key="B-1", at=now - timedelta(seconds=1))
    ancient = put_task("deliver", ProcessState.PROCESSED, at=now - timedelta(days=2))
    old = put_task("hello", key="A-1", at=now - timedelta(hours=3))

    def ids(*args: str) -> list[str]:
        return [task["id"] for task in listed(cli, *args)["tasks"]]

    assert ids() == [undone, failed_, old, ancient]
    assert ids("--workflow", "deliver") == [undone, ancient]
    assert ids("--key", "A-1") == [old]
    assert ids("--since", "1h") == [undone, failed_]
    assert ids("--since", "1d", "--workflow", "hello") == [failed_, old]
    assert ids("--state", "error,compensated", "--workflow", "hello") == [failed_]
    assert ids("--workflow", "nope") == []
    assert listed(cli, "--limit", "2") | {"tasks": None} == {
        "tasks": None,
        "count": 2,
        "more": True,
    }
    assert listed(cli, "--limit", "4")["more"] is False
    assert ok(cli("tasks", "--limit", "2")).splitlines()[-1] == (
        "2 tasks shown (more match; raise --limit)"
    )
    assert ok(cli("tasks", "--workflow", "deliver")).splitlines()[-1] == "2 tasks"
    assert ok(cli("tasks", "--key", "nope")).strip() == "no tasks"


# -- tables that fit -----------------------------------------------------------------
def test_tasks_fit_80_columns_with_the_error_on_one_line(
    cli: Cli, cli_env: dict[str, str], put_task: PutTask
) -> None:
    long = "the card was declined by the issuing bank: " + "do not honour, " * 12
    made = {
        put_task("deliver", ProcessState.COMPENSATED, key=f"ORDER-2024-{n:05}", error={"reason": r})
        for n, r in enumerate(["refused: card declined", long, "stock ran out"])
    }
    made.add(put_task("hello", ProcessState.PROCESSED, key="ORDER-2024-00099"))

    narrow = ok(cli("tasks", env={**cli_env, "COLUMNS": "80"})).splitlines()
    wide = ok(cli("tasks", env={**cli_env, "COLUMNS": "120"})).splitlines()

    for lines, width in ((narrow, 80), (wide, 120)):
        assert len(lines) == 1 + len(made) + 1, lines  # header, one line per task, the count
        assert all(len(line) <= width for line in lines), lines
        assert lines[0].split()[0] == "id"
        assert "error" in lines[0].split()
        rows = {line.split()[0]: line for line in lines[1:-1]}
        assert set(rows) == made
        assert sum("compensated" in row.split() for row in rows.values()) == 3
        assert any("processed" in row.split() for row in rows.values())
        assert any(row.endswith("refused: card declined") for row in rows.values())
        assert any(row.endswith("stock ran out") for row in rows.values())
        (cut,) = [row for row in rows.values() if "the card was declined" in row]
        assert cut.endswith("…")
    assert "ORDER-2024-00001" in "\n".join(wide)  # wider: the keys come back whole
