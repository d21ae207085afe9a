"""`shepherd worker --agents PATTERNS`, run for real: one pool of processes per remote service.

A scheduler process and two agent processes, one started with
`--agents "payments.*"` and one with `--agents "email.*"`, share one store
(SQLite file, or PostgreSQL database). Every agent execution records the
process that ran it, so the test shows each agent ran in its own pool only.
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from support.pool_app import build_app

Cli = Callable[..., subprocess.CompletedProcess[str]]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

APP = "support.pool_app:app"
#: The directory holding `support`, put on the processes' PYTHONPATH to find the app.
TESTS = Path(__file__).resolve().parents[1]
#: Seconds to wait for a task to end before failing (a backstop, not a timing claim).
PATIENCE = 60.0
#: Tasks of each workflow.
ORDERS = 4


def pool_env(cli_env: dict[str, str], store_url: str, log: Path) -> dict[str, str]:
    """The processes' environment: the shared store, the app's module, the execution log."""
    return {**cli_env, "SHEPHERD_STORE": store_url, "PYTHONPATH": str(TESTS), "POOL_LOG": str(log)}


def one_error(completed: subprocess.CompletedProcess[str], code: int = 2) -> str:
    """The one `error:` line of a command that exited `code`."""
    assert completed.returncode == code, (completed.returncode, completed.stdout, completed.stderr)
    (line,) = completed.stderr.splitlines()
    assert line.startswith("error: ")
    return line


async def test_each_pool_runs_only_the_agents_it_was_started_for(
    shared_store: str,
    shepherd_cli: Cli,
    shepherd_process: Any,
    cli_env: dict[str, str],
    tmp_path: Path,
) -> None:
    log = tmp_path / "executions.jsonl"
    env = pool_env(cli_env, shared_store, log)
    worker = ("worker", "--app", APP)
    with (
        shepherd_process(*worker, "--roles", "scheduler,supervisor", env=env) as schedulers,
        shepherd_process(*worker, "--roles", "agent", "--agents", "payments.*", env=env) as pay,
        shepherd_process(*worker, "--roles", "agent", "--agents", "email.*", env=env) as email,
    ):
        assert " roles=agent agents=payments.charge,payments.refund " in pay.ready_line
        assert " roles=agent agents=email.send " in email.ready_line
        assert " agents=" not in schedulers.ready_line
        async with build_app(shared_store) as app:
            ids = [
                await app.submit(flow, {"order": n})
                for n in range(ORDERS)
                for flow in ("checkout", "refund")
            ]
            results = {task_id: await app.result(task_id, timeout=PATIENCE) for task_id in ids}
        listed = shepherd_cli("workers", "--json", env=env)
        for process in (schedulers, pay, email):
            assert process.terminate() == 0, process.stderr()

    pids = {"payments": pay.process.pid, "email": email.process.pid}
    for task_id, result in results.items():  # every task completed, each call in its pool
        assert len(result) == 2, (task_id, result)
        for call in result:
            assert call["pid"] == pids[call["agent"].split(".")[0]], (task_id, result)

    executions = [json.loads(line) for line in log.read_text().splitlines()]
    assert Counter(e["agent"] for e in executions) == {
        "payments.charge": ORDERS,
        "payments.refund": ORDERS,
        "email.send": 2 * ORDERS,
    }
    ran_in = {(e["agent"].split(".")[0], e["pid"]) for e in executions}
    assert ran_in == {("payments", pids["payments"]), ("email", pids["email"])}

    assert listed.returncode == 0, listed.stderr
    served = {w["pid"]: (w["roles"], w["agents"]) for w in json.loads(listed.stdout)}
    assert served == {
        schedulers.process.pid: (["scheduler", "supervisor"], []),
        pids["payments"]: (["agent"], ["payments.charge", "payments.refund"]),
        pids["email"]: (["agent"], ["email.send"]),
    }


@pytest.mark.parametrize("command", ["worker", "run"])
def test_a_pattern_that_matches_no_agent_exits_2_and_creates_no_store(
    shepherd_cli: Cli, cli_store_url: str, command: str
) -> None:
    roles = ("--roles", "agent") if command == "worker" else ()
    refused = shepherd_cli(command, "--app", "cliapp:app", *roles, "--agents", "greet,shuot*")
    assert one_error(refused) == (
        "error: invalid setting 'agents': pattern 'shuot*' matches no registered agent "
        "(registered: greet, ship, shout)"
    )
    assert not Path(cli_store_url.removeprefix("sqlite:///")).exists()


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (("--roles", "scheduler,supervisor", "--agents", "greet"), "needs the agent role"),
        (("--agents", " , "), "name at least one agent or glob pattern"),
        (("--agents", ""), "name at least one agent or glob pattern"),
    ],
)
def test_agents_without_the_agent_role_or_without_a_pattern_is_a_usage_error(
    shepherd_cli: Cli, cli_store_url: str, options: tuple[str, ...], says: str
) -> None:
    refused = shepherd_cli("worker", "--app", "cliapp:app", *options)
    assert says in one_error(refused)
    assert not Path(cli_store_url.removeprefix("sqlite:///")).exists()


def test_the_help_of_worker_and_run_explains_agents(shepherd_cli: Cli) -> None:
    for command in ("worker", "run"):
        helped = shepherd_cli(command, "--help")
        assert helped.returncode == 0, helped.stderr
        assert "--agents PATTERNS" in helped.stdout
        assert "glob" in helped.stdout
