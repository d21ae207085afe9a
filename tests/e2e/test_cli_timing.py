"""`shepherd submit --delay / --at / --deadline`, and what `tasks` and `show` say of a waiting task.

Run in this process (`shepherd_cli_in_process`): what a command prints and
stores is the point. A bad value is a one-line usage error that stores nothing.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest

Cli = Callable[..., subprocess.CompletedProcess[str]]

pytestmark = [pytest.mark.timeout(120)]

APP = "cliapp:app"


def ok_json(completed: subprocess.CompletedProcess[str]) -> Any:
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


def test_a_delayed_submit_is_stored_with_its_due_time_and_deadline(
    shepherd_cli_in_process: Cli,
) -> None:
    cli = shepherd_cli_in_process
    later = cli("submit", "--app", APP, "hello", "{}", "--delay", "30m", "--deadline", "1h")
    assert later.returncode == 0, later.stderr
    at = cli("submit", "--app", APP, "hello", "{}", "--at", "2999-01-31T09:00+02:00")
    assert at.returncode == 0, at.stderr

    shown = ok_json(cli("show", later.stdout.strip(), "--json"))
    due = datetime.fromisoformat(shown["not_before"])
    assert due - datetime.fromisoformat(shown["created_at"]) == timedelta(minutes=30)
    assert datetime.fromisoformat(shown["deadline"]) == due + timedelta(hours=1)
    other = ok_json(cli("show", at.stdout.strip(), "--json"))
    assert datetime.fromisoformat(other["not_before"]) == datetime.fromisoformat(
        "2999-01-31T07:00+00:00"
    )
    assert other["deadline"] is None

    listed = cli("tasks")
    assert listed.returncode == 0, listed.stderr
    assert "pending, due 2999-01-31 07:00:00Z" in listed.stdout
    assert "pending, due " in listed.stdout.replace("2999-01-31 07:00:00Z", "")
    assert "deadline" in cli("show", later.stdout.strip()).stdout


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--delay", "5x"], "'5x' is not a duration"),
        (["--delay", "-5m"], "'-5m' is not a duration"),
        (["--deadline", "soon"], "'soon' is not a duration"),
        (["--at", "2030-13-01"], "is not an ISO 8601 time"),
        (["--at", "tomorrow"], "is not an ISO 8601 time"),
        (["--at", "2030-01-01T10:00"], "has no time zone"),
        (["--at", "2030-01-01T10:00Z", "--delay", "5m"], "--delay and --at cannot be combined"),
        (["--delay", "40000d"], "invalid setting 'delay': delay must be at most"),
    ],
)
def test_a_bad_delay_or_time_is_one_line_and_stores_nothing(
    shepherd_cli_in_process: Cli, args: list[str], says: str
) -> None:
    cli = shepherd_cli_in_process
    refused = cli("submit", "--app", APP, "hello", "{}", *args)
    assert refused.returncode == 2, (refused.stdout, refused.stderr)
    (line,) = refused.stderr.splitlines()
    assert line.startswith("error: ")
    assert says in line
    listed = cli("tasks", "--app", APP, "--json")
    assert listed.returncode != 0 or json.loads(listed.stdout)["tasks"] == []
