"""`shepherd schedules`: list with the last and next run, add, set, pause, resume, trigger.

Run in this process (`shepherd_cli_in_process`): what a command prints, its
exit code and what it stores are the point. A bad value is one line naming
the schedule and the problem, exit code 2, and stores nothing.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest

Cli = Callable[..., subprocess.CompletedProcess[str]]

pytestmark = [pytest.mark.timeout(120)]

APP = "cliapp:app"


def ok(completed: subprocess.CompletedProcess[str]) -> str:
    assert completed.returncode == 0, completed.stderr
    return completed.stdout


def listed(cli: Cli) -> dict[str, Any]:
    shown = json.loads(ok(cli("schedules", "--app", APP, "--json")))
    return {s["name"]: s for s in shown["schedules"]}


def test_add_pause_resume_set_and_trigger_a_schedule(shepherd_cli_in_process: Cli) -> None:
    cli = shepherd_cli_in_process
    assert ok(cli("schedules", "--app", APP)) == "no schedules\n"
    added = cli(
        "schedules",
        "add",
        "nightly",
        "--app",
        APP,
        "--workflow",
        "hello",
        "--cron",
        "30 2 * * *",
        "--timezone",
        "Europe/Berlin",
        "--data",
        '{"who": "ann"}',
    )
    assert ok(added) == "added schedule 'nightly' (hello, 30 2 * * * (Europe/Berlin))\n"
    table = ok(cli("schedules", "list", "--app", APP))
    assert "nightly" in table
    assert "active" in table
    nightly = listed(cli)["nightly"]
    assert nightly["last_tick"] is None
    due = datetime.fromisoformat(nightly["next_tick"])
    local = due.astimezone(ZoneInfo("Europe/Berlin"))
    assert (local.hour, local.minute) == (2, 30)
    assert due > datetime.now(UTC)
    assert nightly["data"] == {"who": "ann"}

    assert ok(cli("schedules", "pause", "nightly", "--app", APP)).startswith("paused schedule")
    paused = listed(cli)["nightly"]
    assert (paused["paused"], paused["next_tick"]) == (True, None)
    assert "paused" in ok(cli("schedules", "--app", APP))
    assert ok(cli("schedules", "resume", "nightly", "--app", APP)).startswith("resumed schedule")
    assert listed(cli)["nightly"]["paused"] is False

    changed = cli("schedules", "set", "nightly", "--app", APP, "--every", "1h", "--catch-up", "all")
    assert ok(changed) == "changed schedule 'nightly' (hello, every 3600 s)\n"
    now = listed(cli)["nightly"]
    assert (now["cron"], now["every"], now["catch_up"]) == (None, 3600.0, "all")

    task_id = ok(cli("schedules", "trigger", "nightly", "--app", APP)).strip()
    shown = json.loads(ok(cli("show", task_id, "--json")))
    assert shown["workflow"] == "hello"
    assert shown["input"] == {"who": "ann"}
    assert shown["key"].startswith("schedule:nightly!triggered@")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["add", "s", "--workflow", "hello", "--cron", "61 * * * *"], "is not a cron expression"),
        (
            ["add", "s", "--workflow", "hello", "--cron", "0 2 * * *", "--timezone", "Mars/Base"],
            "unknown timezone 'Mars/Base'",
        ),
        (
            ["add", "s", "--workflow", "hello", "--cron", "0 2 * * *", "--every", "1m"],
            "give exactly one of cron and every",
        ),
        (["add", "s", "--workflow", "hello"], "give exactly one of cron and every"),
        (["add", "s", "--workflow", "nope", "--every", "1m"], "unknown workflow 'nope'"),
        (
            ["add", "s", "--workflow", "hello", "--every", "1m", "--catch-up", "some"],
            "catch_up must be",
        ),
        (
            [
                "add",
                "s",
                "--workflow",
                "hello",
                "--every",
                "1m",
                "--catch-up",
                "all",
                "--max-catch-up",
                "0",
            ],
            "max_catch_up must be from 1",
        ),
        (["pause", "ghost"], "unknown schedule 'ghost'"),
        (["resume", "ghost"], "unknown schedule 'ghost'"),
        (["trigger", "ghost"], "unknown schedule 'ghost'"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_stores_nothing(
    shepherd_cli_in_process: Cli, args: list[str], says: str
) -> None:
    cli = shepherd_cli_in_process
    refused = cli("schedules", *args, "--app", APP)
    assert refused.returncode == 2, (refused.stdout, refused.stderr)
    (line,) = refused.stderr.splitlines()
    assert line.startswith("error: ")
    assert says in line
    assert listed(cli) == {}
    assert json.loads(ok(cli("tasks", "--app", APP, "--json")))["tasks"] == []
