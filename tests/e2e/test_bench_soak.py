"""The soak runs end to end for a few seconds: workers killed and replaced, no task lost."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

FIELDS = {
    "submitted",
    "processed",
    "processed_via",
    "tasks_lost",
    "still_live",
    "duplicated_executions",
    "rss_start_kib",
    "rss_end_kib",
    "samples",
    "kills",
    "restarts",
    "size_half_bytes",
    "size_end_bytes",
    "size_ratio",
    "size_holds",
    "rate_sustained",
}


def test_soak_kills_workers_and_loses_nothing() -> None:
    proc = subprocess.run(
        [
            sys.executable, "-m", "shepherd.bench", "--workloads", "soak",
            "--minutes", "0.1", "--rate", "20", "--kill-every", "3", "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    soak = report["workloads"]["soak"]
    assert set(soak) >= FIELDS
    assert soak["tasks_lost"] == 0
    assert soak["submitted"] > 0
    assert soak["processed"] == soak["submitted"]
    assert soak["still_live"] == 0
    # One SIGKILL at 3 s of the 6 s, its replacement started at once.
    assert len(soak["kills"]) == 1
    assert soak["worker_unexpected_exits"] == 0
    assert soak["restarts"] == []
    # Every step of every task ran; a kill may only add executions.
    assert soak["distinct_steps"] == 3 * soak["submitted"]
    assert soak["steps_missing"] == 0
    # Counted by the stores: the bench's own commits (its submits) are about one a
    # workflow; the workers' (told before each kill and stop) add their claims,
    # steps and finishes.
    assert soak["commits_per_workflow"] > 2
    assert [s["at_s"] for s in soak["samples"]][-2:] == pytest.approx([3.0, 6.0], abs=1.0)
    assert all(s["store_bytes"] for s in soak["samples"])
    assert all(rss for rss in soak["rss_start_kib"] + soak["rss_end_kib"])
    assert {t["workload"] for t in report["targets"]} == {"soak"}


def test_soak_refuses_restarts_without_postgresql() -> None:
    proc = subprocess.run(
        [
            sys.executable, "-m", "shepherd.bench", "--workloads", "soak",
            "--restart-command", "true",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )  # fmt: skip
    assert proc.returncode == 2
    assert "--restart-command needs a PostgreSQL --store" in proc.stderr
