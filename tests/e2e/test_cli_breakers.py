"""`shepherd breakers` against a store whose breakers a test set up.

The commands run in the test's process (`shepherd_cli_in_process`): what they print is
the point here, not the process."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from shepherd.core.breaker import BreakerPolicy
from shepherd.store.sqlite import SQLiteStore

Cli = Callable[..., subprocess.CompletedProcess[str]]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


@pytest.fixture
def cli(shepherd_cli_in_process: Cli) -> Cli:
    """`shepherd ...` run in this process (support.cli_inprocess)."""
    return shepherd_cli_in_process


SLOW = BreakerPolicy(failure_threshold=3, cool_down=60.0)


def ok_json(completed: subprocess.CompletedProcess[str]) -> Any:
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


def prepare(url: str, *, failures: dict[str, int]) -> None:
    """Report `failures[service]` failed calls of each service into the store at `url`."""

    async def go() -> None:
        store = SQLiteStore(url)
        await store.open()
        try:
            for service, count in failures.items():
                for _ in range(count):
                    await store.breaker_report(service, SLOW, failed=True)
        finally:
            await store.close()

    asyncio.run(go())


def test_breakers_lists_each_service_and_the_latest_changes(cli: Cli, cli_store_url: str) -> None:
    prepare(cli_store_url, failures={"payments": 3, "shipping": 1})

    shown = ok_json(cli("breakers", "--json"))

    payments, shipping = shown["breakers"]
    assert (payments["service"], payments["state"], payments["consecutive_failures"]) == (
        "payments",
        "open",
        3,
    )
    opened_at = datetime.fromisoformat(payments["opened_at"])
    assert datetime.fromisoformat(payments["probe_at"]) == opened_at + timedelta(seconds=60)
    assert (shipping["service"], shipping["state"], shipping["probe_at"]) == (
        "shipping",
        "closed",
        None,
    )
    assert (shipping["window_calls"], shipping["window_failures"]) == (1, 1)
    (event,) = shown["events"]
    assert (event["service"], event["from_state"], event["to_state"]) == (
        "payments",
        "closed",
        "open",
    )
    assert event["detail"]["reason"] == "consecutive_failures"
    assert ok_json(cli("breakers", "--json", "--events", "0"))["events"] == []

    table = cli("breakers", "--app", "cliapp:app")
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), table.stdout
    assert any(line.split()[:2] == ["payments", "open"] for line in lines), table.stdout
    assert any(line.split()[:2] == ["shipping", "closed"] for line in lines), table.stdout
    assert "closed -> open" in table.stdout


def test_breakers_of_a_store_without_any(cli: Cli, cli_store_url: str) -> None:
    prepare(cli_store_url, failures={})

    assert ok_json(cli("breakers", "--json")) == {"breakers": [], "events": []}
    table = cli("breakers")
    assert (table.returncode, table.stdout.strip()) == (0, "no breakers")


def test_breakers_of_a_missing_store_is_a_one_line_error(cli: Cli, tmp_path: Path) -> None:
    completed = cli("breakers", "--store", f"sqlite:///{tmp_path}/missing.db")

    assert completed.returncode == 6, (completed.stdout, completed.stderr)  # store unavailable
    lines = completed.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error: ")
    assert "missing.db" in lines[0]


def test_breakers_refuses_a_negative_event_count(cli: Cli) -> None:
    completed = cli("breakers", "--events", "-1")

    assert completed.returncode == 2
    assert "--events" in completed.stderr
