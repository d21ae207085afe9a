"""The benchmark runs end to end with tiny sizes: every workload, no task lost."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


def test_bench_runs_every_workload_and_loses_nothing() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "shepherd.bench", "--n", "50", "--w3-n", "30", "--json"],
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    workloads = report["workloads"]
    assert set(workloads) == {"W1", "W2", "W3"}
    for name in ("W1", "W2"):
        assert workloads[name]["n"] == 50
        assert workloads[name]["processed"] == 50
        assert workloads[name]["tasks_lost"] == 0
    w3 = workloads["W3"]
    assert w3["n"] == 30
    assert w3["tasks_lost"] == 0
    assert w3["processed"] == 30
    # Every step ran at least once; a crash may only add executions, never drop one.
    assert w3["distinct_steps"] == 3 * 30
    assert w3["executions"] >= w3["distinct_steps"]
    assert {t["workload"] for t in report["targets"]} == {"W1", "W2", "W3"}


def test_bench_prints_tables_without_json() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "shepherd.bench", "--workloads", "W1", "--n", "20"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "workflows/s" in proc.stdout
    assert "Targets" in proc.stdout


def test_bench_rejects_an_unknown_workload() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "shepherd.bench", "--workloads", "W9"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert "W9" in proc.stderr
