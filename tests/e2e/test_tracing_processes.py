"""Tracing across real processes: every step span's parents reach its submitter's span.

Three kinds of process share one store (an SQLite file, or a PostgreSQL
database), each configuring OpenTelemetry at import (`support.traced_app`) and
writing its spans to a file of its own: the submitters (`shepherd submit`), a
worker running the scheduler, the supervisor and the payments agent, and a
worker running the email agent alone. A checkout's first step runs beside its
scheduler, its second in the other worker; the test reads every file and
follows each step span's parents up to the `shepherd.submit` span of its task.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from support.spans import Span, chain, named, read_spans, span_id

Cli = Callable[..., subprocess.CompletedProcess[str]]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

APP = "support.traced_app:app"
#: The directory holding `support`, put on the processes' PYTHONPATH to find the app.
TESTS = Path(__file__).resolve().parents[1]
#: Seconds to wait for a task, or for its spans, before failing (a backstop).
PATIENCE = 60.0
ORDERS = 3


def traced_env(cli_env: dict[str, str], store_url: str, spans: Path) -> dict[str, str]:
    """A process's environment: the shared store, the app's module, its own span file."""
    return {
        **cli_env,
        "SHEPHERD_STORE": store_url,
        "PYTHONPATH": str(TESTS),
        "TRACE_FILE": str(spans),
    }


def wait_for_spans(files: list[Path], runs: int) -> list[Span]:
    """Poll the files until `runs` task runs' spans are written (they end just after
    their tasks), and return every span."""
    deadline = time.monotonic() + PATIENCE
    while True:
        spans = read_spans(files)
        if len(named(spans, "shepherd.task ")) >= runs:
            return spans
        assert time.monotonic() < deadline, f"{runs} task runs' spans not written: {spans}"
        time.sleep(0.05)


async def test_every_step_span_reaches_its_submitters_span_across_processes(
    shared_store: str,
    shepherd_cli: Cli,
    shepherd_process: Any,
    cli_env: dict[str, str],
    tmp_path: Path,
) -> None:
    files = {name: tmp_path / f"{name}.spans" for name in ("submitter", "scheduler", "email")}
    env = {name: traced_env(cli_env, shared_store, path) for name, path in files.items()}
    worker = ("worker", "--app", APP)
    scheduler_roles = ("--roles", "scheduler,supervisor,agent", "--agents", "payments.*")
    with (
        shepherd_process(*worker, *scheduler_roles, env=env["scheduler"]) as scheduler,
        shepherd_process(
            *worker, "--roles", "agent", "--agents", "email.*", env=env["email"]
        ) as email,
    ):
        submitted = []
        for order in [*({"order": n} for n in range(ORDERS)), {"order": 9, "decline": True}]:
            done = shepherd_cli(
                "submit", "--app", APP, "--json", "--wait", str(PATIENCE), "checkout",
                json.dumps(order), env=env["submitter"],
            )  # fmt: skip
            assert done.returncode == (4 if "decline" in order else 0), done.stderr
            submitted.append(done)
        spans = wait_for_spans(list(files.values()), runs=ORDERS + 1)
        for process in (scheduler, email):
            assert process.terminate() == 0, process.stderr()

    by_id = {span_id(s): s for s in spans}
    submits = {s["attributes"]["shepherd.task_id"]: s for s in named(spans, "shepherd.submit")}
    assert len(submits) == ORDERS + 1
    assert {s["file"] for s in submits.values()} == {"submitter.spans"}
    steps = named(spans, "shepherd.step ")
    # Three checkouts of two steps; the declined one stops at its first.
    assert len(steps) == 2 * ORDERS + 1
    for step in steps:
        task_id = step["attributes"]["shepherd.task_id"]
        parents = chain(step, by_id)
        assert [s["name"] for s in parents] == [
            step["name"],
            "shepherd.task checkout",
            "shepherd.submit",
        ], step
        assert parents[-1] is submits[task_id]
        assert parents[1]["attributes"]["shepherd.task_id"] == task_id
        assert {s["context"]["trace_id"] for s in parents} == {
            submits[task_id]["context"]["trace_id"]
        }
        assert step["attributes"]["shepherd.workflow"] == "checkout"
        # Each step span was written by the process that ran its agent.
        ran_in = "email.spans" if step["name"] == "shepherd.step email.send" else "scheduler.spans"
        assert (step["file"], parents[1]["file"]) == (ran_in, "scheduler.spans")
    # The declined charge is an error on its step span and on its task run's.
    (declined,) = [s for s in steps if s["status"]["status_code"] == "ERROR"]
    assert declined["name"] == "shepherd.step payments.charge"
    assert declined["status"]["description"] == "PermanentError: card declined"
    assert chain(declined, by_id)[1]["status"]["status_code"] == "ERROR"
    # A reply recorded by the scheduler continues the step span that answered it,
    # whether it came from the other worker (queued) or from its own process.
    for reply in named(spans, "shepherd.reply"):
        assert reply["file"] == "scheduler.spans"
        assert by_id[reply["parent_id"]]["name"].startswith("shepherd.step ")
    assert {by_id[r["parent_id"]]["file"] for r in named(spans, "shepherd.reply")} == {
        "email.spans",
        "scheduler.spans",
    }


async def test_a_scheduler_that_does_not_trace_passes_the_submitters_context_on(
    shared_store: str,
    shepherd_cli: Cli,
    shepherd_process: Any,
    cli_env: dict[str, str],
    tmp_path: Path,
) -> None:
    files = {name: tmp_path / f"{name}.spans" for name in ("submitter", "email")}
    env = {name: traced_env(cli_env, shared_store, path) for name, path in files.items()}
    untraced = {k: v for k, v in env["email"].items() if k != "TRACE_FILE"}
    worker = ("worker", "--app", APP)
    scheduler_roles = ("--roles", "scheduler,supervisor,agent", "--agents", "payments.*")
    with (
        shepherd_process(*worker, *scheduler_roles, env=untraced) as scheduler,
        shepherd_process(
            *worker, "--roles", "agent", "--agents", "email.*", env=env["email"]
        ) as email,
    ):
        for order in range(ORDERS):
            done = shepherd_cli(
                "submit", "--app", APP, "--wait", str(PATIENCE), "checkout",
                json.dumps({"order": order}), env=env["submitter"],
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
        for process in (scheduler, email):
            assert process.terminate() == 0, process.stderr()

    # Both workers stopped: every span they made is written (each as it ended).
    spans = read_spans(list(files.values()))
    by_id = {span_id(s): s for s in spans}
    submits = {s["attributes"]["shepherd.task_id"]: s for s in named(spans, "shepherd.submit")}
    steps = named(spans, "shepherd.step ")
    assert len(submits) == len(steps) == ORDERS
    assert named(spans, "shepherd.task ") == []
    for step in steps:
        assert step["name"] == "shepherd.step email.send"
        parents = chain(step, by_id)
        assert parents[1:] == [submits[step["attributes"]["shepherd.task_id"]]]
