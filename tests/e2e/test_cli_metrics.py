"""`shepherd run --metrics-port`, run for real: a Prometheus scrape of a role process over HTTP.

The process runs every role on a SQLite file; tasks are submitted with
`shepherd submit`; /metrics is fetched over HTTP and parsed with
prometheus-client's parser until its counters and histograms show the tasks
(polled with a deadline). A port that is taken is a one-line error at start.
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from support.cli_checks import refused

Cli = Callable[..., subprocess.CompletedProcess[str]]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

APP = "cliapp:app"
#: Seconds the test waits for the process to show its work (a backstop, not a timing claim).
PATIENCE = 60.0

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(url: str) -> Samples:
    answer = httpx.get(url, timeout=10.0)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    }


def metrics_url(ready_line: str) -> str:
    (url,) = [part.removeprefix("metrics=") for part in ready_line.split() if "metrics=" in part]
    return url


def test_run_serves_metrics_whose_counters_and_histograms_move(
    shepherd_cli: Cli, shepherd_process: Any
) -> None:
    with shepherd_process("run", "--app", APP, "--metrics-port", "0") as running:
        url = metrics_url(running.ready_line)
        assert url.startswith("http://127.0.0.1:")
        assert url.endswith("/metrics")
        before = scrape(url)
        assert before[("shepherd_tasks", (("process_state", "pending"),))] == 0.0
        assert ("shepherd_agent_calls_total", (("agent", "greet"),)) not in before

        for name in ("ann", "bo", "cy"):
            submitted = shepherd_cli("submit", "--app", APP, "hello", f'{{"name": "{name}"}}')
            assert submitted.returncode == 0, submitted.stderr
        deadline = time.monotonic() + PATIENCE
        processed = (
            "shepherd_tasks_ended_total",
            (("process_state", "processed"), ("workflow", "hello")),
        )
        while (samples := scrape(url)).get(processed, 0.0) < 3.0:
            assert time.monotonic() < deadline, f"tasks not processed; stderr:\n{running.stderr()}"
            time.sleep(0.05)  # polling interval of a poll with a deadline

        assert httpx.get(url.replace("/metrics", "/"), timeout=10.0).status_code == 404
        assert running.terminate() == 0, running.stderr()

    for agent in ("greet", "shout"):
        labels = (("agent", agent),)
        assert samples[("shepherd_agent_calls_total", labels)] == 3.0
        assert samples[("shepherd_step_duration_seconds_count", labels)] == 3.0
        assert samples[("shepherd_step_duration_seconds_bucket", (*labels, ("le", "+Inf")))] == 3.0
        assert samples[("shepherd_request_claim_lag_seconds_count", labels)] == 3.0
        assert samples[("shepherd_queue_requests", (*labels, ("state", "waiting")))] == 0.0
    assert samples[("shepherd_tasks", (("process_state", "pending"),))] == 0.0
    assert samples[("shepherd_tasks", (("process_state", "processing"),))] == 0.0
    workflow = (("workflow", "hello"),)
    assert samples[("shepherd_task_claim_lag_seconds_count", workflow)] == 3.0
    ended = (("process_state", "processed"), *workflow)
    assert samples[("shepherd_tasks_ended_total", ended)] == 3.0


def test_worker_serves_metrics_too(shepherd_process: Any) -> None:
    with shepherd_process("worker", "--app", APP, "--roles", "agent", "--metrics-port", "0") as w:
        samples = scrape(metrics_url(w.ready_line))
        assert w.terminate() == 0, w.stderr()

    assert samples[("shepherd_queue_requests", (("agent", "greet"), ("state", "taken")))] == 0.0


def test_a_metrics_port_in_use_is_a_one_line_error_before_the_store_is_opened(
    shepherd_cli: Cli, cli_dir: Path
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        completed = shepherd_cli("run", "--app", APP, "--metrics-port", str(port))

    message = refused(completed)
    assert f"cannot serve metrics on 127.0.0.1:{port}" in message
    assert "in use" in message
    assert not (cli_dir / "shepherd.db").exists()


def test_a_metrics_port_out_of_range_is_a_usage_error(shepherd_cli: Cli) -> None:
    completed = shepherd_cli("worker", "--app", APP, "--metrics-port", "70000")

    assert completed.returncode == 2
    assert "--metrics-port" in completed.stderr
