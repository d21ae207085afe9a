"""`shepherd workers`, run for real: a live worker process, and rows a test wrote at chosen times."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest

from shepherd.store.sqlite import SQLiteStore
from shepherd.testing import FakeClock

if TYPE_CHECKING:
    from shepherd.clock import Clock

Cli = Callable[..., subprocess.CompletedProcess[str]]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

APP = "cliapp:app"


def ok_json(completed: subprocess.CompletedProcess[str]) -> Any:
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


def by_instance(cli: Cli, *args: str) -> dict[str, dict[str, Any]]:
    return {w["instance"]: w for w in ok_json(cli("workers", "--json", *args))}


def wait_worker(cli: Cli, instance: str, state: str, timeout: float = 60.0) -> dict[str, Any]:
    """Poll `shepherd workers --json` (each poll a real command) until `instance` is in `state`."""
    deadline = time.monotonic() + timeout
    seen = None
    while time.monotonic() < deadline:
        seen = by_instance(cli).get(instance)
        if seen is not None and seen["state"] == state:
            return seen
    pytest.fail(f"worker {instance} is {seen}, not {state}, after {timeout} s")


def test_a_worker_process_is_listed_alive_then_stopped(
    shepherd_cli: Cli, shepherd_process: Any
) -> None:
    with shepherd_process("worker", "--app", APP, "--roles", "agent") as agents:
        instance = agents.ready_line.split(" instance=")[1].split()[0]
        alive = wait_worker(shepherd_cli, instance, "alive")
        table = shepherd_cli("workers")
        assert agents.terminate() == 0, agents.stderr()

    assert (alive["roles"], alive["agents"]) == (["agent"], ["greet", "ship", "shout"])
    assert alive["pid"] == agents.process.pid
    assert alive["stopped_at"] is None
    assert 0 <= alive["beat_age"] < 10
    assert table.returncode == 0, table.stderr
    assert any(
        line.split()[:1] == [instance] and "alive" in line for line in table.stdout.splitlines()
    )
    stopped = by_instance(shepherd_cli)[instance]
    assert stopped["state"] == "stopped"
    assert stopped["stopped_at"] is not None


def prepare(url: str) -> None:
    """Rows for three processes: one stopped 2 h ago, one silent for a minute, one beating."""

    async def register(clock: Clock, instance: str, *, stop: bool = False) -> None:
        store = SQLiteStore(url, clock=clock)
        await store.open()
        try:
            host, pid, _ = instance.split(":")
            await store.register_worker(
                instance, host=host, pid=int(pid), roles=("scheduler",), agents=()
            )
            if stop:
                await store.stop_worker(instance)
        finally:
            await store.close()

    now = datetime.now(UTC)
    asyncio.run(register(FakeClock(now - timedelta(hours=2)), "old:1:aa", stop=True))
    asyncio.run(register(FakeClock(now - timedelta(minutes=1)), "gone:2:bb"))
    asyncio.run(register(FakeClock(now), "live:3:cc"))


def test_workers_shows_the_live_and_the_recently_dead_since_a_duration(
    shepherd_cli: Cli, cli_store_url: str, cli_env: dict[str, str]
) -> None:
    prepare(cli_store_url)

    recent = by_instance(shepherd_cli)
    older = by_instance(shepherd_cli, "--since", "3h")

    assert {k: w["state"] for k, w in recent.items()} == {"live:3:cc": "alive", "gone:2:bb": "dead"}
    assert recent["gone:2:bb"]["beat_age"] >= 60
    assert (recent["live:3:cc"]["host"], recent["live:3:cc"]["pid"]) == ("live", 3)
    assert older["old:1:aa"]["state"] == "stopped"
    assert set(older) == {"old:1:aa", "gone:2:bb", "live:3:cc"}
    # A ttl of more than a minute makes the silent one alive again; a window under
    # the ttl still lists every live process.
    longer = shepherd_cli(
        "workers", "--json", "--since", "1s", env={**cli_env, "SHEPHERD_WORKER_TTL": "600"}
    )
    assert {w["instance"]: w["state"] for w in ok_json(longer)} == {
        "live:3:cc": "alive",
        "gone:2:bb": "alive",
    }


def test_workers_refuses_a_bad_duration_and_an_app_argument(shepherd_cli: Cli) -> None:
    bad = shepherd_cli("workers", "--since", "soon")
    assert bad.returncode == 2
    assert "'soon' is not a duration" in bad.stderr
    positional = shepherd_cli("workers", APP)
    assert positional.returncode == 2
    assert "pass the app as --app MODULE:ATTR" in positional.stderr


def test_an_empty_registry_says_so(shepherd_cli: Cli, cli_store_url: str) -> None:
    async def create() -> None:
        store = SQLiteStore(cli_store_url)
        await store.open()
        await store.close()

    asyncio.run(create())

    listed = shepherd_cli("workers", "--app", APP)

    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.strip() == "no workers"
    assert ok_json(shepherd_cli("workers", "--json")) == []
